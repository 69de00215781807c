/**
 * Redis's clock, the one every replica agrees on (docs/fleet.md, "Scripts"):
 * the Lua prelude of a script that reads it, `redisTime()` -> µs, ms and the
 * raw TIME answer, called where the script needs it (a commit reads it only
 * when it writes from nothing). Times that must agree across machines (a
 * lease's end, a heartbeat's, the budget's next start, a revision from
 * nothing) are read here, never from a replica's wall clock.
 */
export const REDIS_CLOCK = `local function redisTime()
  local t = redis.call('TIME')
  local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  return us, math.floor(us / 1000), t
end`;
