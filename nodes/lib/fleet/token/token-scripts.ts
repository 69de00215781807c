/**
 * The scripts of the fleet's shared token (token-store.ts): the token under a
 * key per account with its lifetime, and the lock of the one replica that
 * fetches it.
 */
import { Script } from '../redis/script';

/** The token and how long Redis keeps it: {value, lifetime ms, ms left} or {} when none. */
export const TOKEN_READ = new Script({
  name: 'tokenRead',
  keys: ['token'],
  args: [],
  lua: `
local v = redis.call('HMGET', K.token, 'v', 'l')
if not v[1] then return {} end
return { v[1], v[2], redis.call('PTTL', K.token) }`,
});

/** Stores a token this replica fetched, and frees the fetch lock if still ours. */
export const TOKEN_STORE = new Script({
  name: 'tokenStore',
  keys: ['token', 'lock'],
  args: ['sealed', 'lifetimeMs', 'keepMs', 'lockId'],
  lua: `
redis.call('DEL', K.token)
redis.call('HSET', K.token, 'v', A.sealed, 'l', A.lifetimeMs)
redis.call('PEXPIRE', K.token, A.keepMs)
if redis.call('GET', K.lock) == A.lockId then redis.call('DEL', K.lock) end
return 1`,
});

/** Forgets the token, only if it is the given one (a newer token stays). */
export const TOKEN_DROP = new Script({
  name: 'tokenDrop',
  keys: ['token'],
  args: ['sealed'],
  lua: `
if redis.call('HGET', K.token, 'v') == A.sealed then return redis.call('DEL', K.token) end
return 0`,
});

/** Frees the fetch lock only while it holds the given value. */
export const LOCK_RELEASE = new Script({
  name: 'lockRelease',
  keys: ['lock'],
  args: ['lockId'],
  lua: `
if redis.call('GET', K.lock) == A.lockId then return redis.call('DEL', K.lock) end
return 0`,
});
