/**
 * The fleet's token as Redis holds it, tested from outside with a real Redis
 * and the simulator: replicas are ServiceClients on their own Fleet (their own
 * connection and replica id), as separate Node-RED processes are.
 *
 * - a token read from Redis is redacted like one this replica fetched;
 * - Redis alone yields no usable token (sealed with the client secret), and a
 *   replica with a wrong secret reads it as "no token";
 * - one fleet key used by two client IDs keeps two tokens;
 * - a token lives in Redis no longer than min(expires_in, 30 min).
 */
import assert from 'node:assert/strict';
import { ServiceClient } from '../../../nodes/lib/client/service-client';
import type { Fleet } from '../../../nodes/lib/fleet/fleet';
import { ChargingError } from '../../../nodes/lib/errors';
import type { ChargingServiceSimulator } from '../../../simulator/simulator';
import { startSimulator, CLIENT_ID, CLIENT_SECRET } from '../../harness';
import { dumpRedis, fleetSuite, IDENTITY, simulatorToken, sleep } from './fleet-fixture';

describe('fleet: the token at rest in Redis (real Redis, simulator)', function () {
  this.timeout(20_000);
  const suite = fleetSuite();
  let sim: ChargingServiceSimulator;
  const clients: ServiceClient[] = [];
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close()));
    await sim?.stop();
  });

  function replica(fleet: Fleet = suite.replica(), options: Partial<ConstructorParameters<typeof ServiceClient>[0]> = {}): ServiceClient {
    const c = new ServiceClient({ baseUrl: sim.baseUrl, authUrl: sim.authUrl, clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, fleet: fleet.clientHooks(), ...options });
    clients.push(c);
    return c;
  }

  /** The token keys of this test's fleet (each test has its own fleet key). */
  async function tokenKeys(): Promise<string[]> {
    const prefix = suite.replica().keys.prefix;
    return (await suite.redis.admin().keys(`${prefix}token*`)).filter((k) => !k.endsWith(':lock'));
  }

  it('redacts a token read from Redis in an error that echoes the Authorization header', async () => {
    sim = await startSimulator();
    await replica().getProgress('RFID-1');
    const reader = replica();
    sim.inject({ target: 'get', kind: 'echo', status: 400 });
    const err = await reader.getProgress('RFID-1').then(
      () => assert.fail('a 400 must fail'),
      (e: unknown) => e as ChargingError,
    );
    assert.equal(sim.counters.tokenRequests, 1, 'the second replica used the fleet token, read from Redis');
    const token = String(sim.requests.at(-1)?.headers.authorization).replace('Bearer ', '');
    assert.ok(token.length > 8);
    for (const text of [err.message, String(err.serviceMessage), JSON.stringify(err)]) assert.ok(!text.includes(token), `the token is in: ${text}`);
    assert.match(err.message, /Authorization: Bearer \*\*\*/);
  });

  it('holds no usable token: not in clear, and a replica with another secret reads it as no token', async () => {
    sim = await startSimulator();
    await replica().getProgress('RFID-1');
    const token = String(sim.requests.at(-1)?.headers.authorization).replace('Bearer ', '');
    const dump = await dumpRedis(suite.redis);
    assert.equal((await tokenKeys()).length, 1, `${dump}\n${suite.reported.join('\n')}`);
    assert.ok(!dump.includes(token), 'the token is not in Redis in clear');
    assert.ok(!dump.includes(CLIENT_SECRET), 'nor the secret');

    // Same fleet, same account, wrong secret: the fleet's token is not handed out; its own request is refused.
    const wrong = replica(suite.replica(), { clientSecret: 'not-the-secret-of-this-account' });
    await assert.rejects(wrong.getProgress('RFID-1'), (e: ChargingError) => e.code === 'AUTH');
    const used = sim.requests.filter((r) => r.path.startsWith('/poi/')).map((r) => r.headers.authorization);
    assert.equal(used.length, 1, 'the wrong-secret replica never reached the service with the fleet token');
    assert.equal(sim.counters.tokensIssued, 1);
  });

  it('does not share one token between two client IDs under one fleet key', async () => {
    sim = await startSimulator();
    await replica().getProgress('RFID-1');
    // The simulator knows one client: another client ID is refused at the token endpoint, as a wrong account would be.
    const other = replica(suite.replica(), { clientId: 'another-client-of-this-fleet' });
    await assert.rejects(other.getProgress('RFID-1'), (e: ChargingError) => e.code === 'AUTH');
    assert.equal(sim.counters.tokenRequests, 2, 'the second client ID asked for its own token');
    assert.equal(sim.requests.filter((r) => r.path.startsWith('/poi/')).length, 1, "the first account's token was not used for the second");
  });

  it('keeps the token in Redis no longer than 30 min, however long expires_in says', async () => {
    sim = await startSimulator({ tokenLifetimeSec: 24 * 3600 });
    await replica().getProgress('RFID-1');
    const [key] = await tokenKeys();
    const pttl = await suite.redis.admin().pttl(key);
    assert.ok(pttl > 0 && pttl <= 30 * 60 * 1000, `PTTL ${pttl} ms`);
  });

  it('a token the fleet hands out again and again stays redacted (401s whose drop in Redis was lost)', async () => {
    sim = await startSimulator();
    const fleet = suite.replica();
    // The refused token stays in Redis, as when the drop did not reach it: each new fetch reads the same token.
    const hooks = fleet.clientHooks();
    let handedOut = 0;
    const c = replica(fleet, { fleet: { ...hooks, fetchToken: (f, id) => ((handedOut += 1), hooks.fetchToken(f, id)), invalidateToken: () => undefined }, tokenCache: { failureBackoffMs: 5, maxFailureBackoffMs: 5 } });
    sim.inject({ target: 'get', kind: 'status', status: 401, body: '{"error":"invalid_token"}', times: 6 });
    for (let i = 0; i < 3; i++) {
      await c.getProgress('RFID-1').catch(() => undefined);
      await sleep(20); // the cache's back-off after a refused token (5 ms here) lapses
    }
    assert.equal(sim.counters.tokenRequests, 1, 'one token');
    assert.ok(handedOut >= 4, `the fleet handed it out again after each 401 (${handedOut} times)`);
    sim.inject({ target: 'get', kind: 'echo', status: 400 });
    const err = await c.getProgress('RFID-1').then(
      () => assert.fail('a 400 must fail'),
      (e: unknown) => e as ChargingError,
    );
    const token = String(sim.requests.at(-1)?.headers.authorization).replace('Bearer ', '');
    assert.ok(token.length > 8);
    for (const text of [err.message, String(err.serviceMessage), JSON.stringify(err)]) assert.ok(!text.includes(token), `the token is in: ${text}`);
  });

  it('believes a stored token for 30 min at most, even when its key in Redis was given a day to live', async () => {
    sim = await startSimulator();
    const fleet = suite.replica();
    const fetch = simulatorToken(sim);
    assert.equal((await fleet.tokens.fetch(fetch, IDENTITY)).source, 'fetched');
    const [key] = await tokenKeys();
    await suite.redis.admin().pexpire(key, 24 * 3600 * 1000);
    const read = await suite.replica().tokens.fetch(fetch, IDENTITY);
    assert.equal(read.source, 'fleet');
    assert.ok(read.expiresIn !== undefined && read.expiresIn <= 30 * 60, `believed for ${read.expiresIn} s`);
  });
});
