/**
 * Redis's clock, the one every replica agrees on (docs/fleet.md, "Scripts"):
 * the Lua prelude a script includes to read it once, as `nowMs` and `nowUs`.
 * Times that must agree across machines (a lease's end, a heartbeat's, the
 * budget's next start, a revision from nothing) are read here, never from a
 * replica's wall clock.
 */
export const REDIS_NOW = `local redisTime = redis.call('TIME')
local nowUs = tonumber(redisTime[1]) * 1000000 + tonumber(redisTime[2])
local nowMs = math.floor(nowUs / 1000)`;
