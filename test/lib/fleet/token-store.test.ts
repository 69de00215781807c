/**
 * One access token for the fleet: three replicas, each with its own
 * TokenCache over the shared store, against the simulator's token endpoint
 * (counted there) and a real Redis.
 */
import assert from 'node:assert/strict';
import { TokenCache, type TokenResponse } from '../../../nodes/lib/client/token-cache';
import type { ChargingServiceSimulator } from '../../../simulator/simulator';
import { startSimulator, CLIENT_SECRET } from '../../harness';
import { RedisNemesis } from '../../redis-nemesis';
import { dumpRedis, fleetSuite, IDENTITY, simulatorToken, sleep } from './fleet-fixture';

describe('fleet: one token for the fleet (real Redis, simulator token endpoint)', function () {
  this.timeout(20_000);
  const suite = fleetSuite();
  let sim: ChargingServiceSimulator;
  afterEach(async () => sim?.stop());

  it('three replicas asking at once: one token request, the same token everywhere, and neither the client secret nor the token in clear in Redis', async () => {
    sim = await startSimulator();
    const fetch = simulatorToken(sim);
    const replicas = [suite.replica(), suite.replica(), suite.replica()];
    const caches = replicas.map((f) => new TokenCache(() => f.tokens.fetch(fetch, IDENTITY)));
    const got = await Promise.all(caches.flatMap((c) => Array.from({ length: 10 }, () => c.get())));
    assert.equal(sim.counters.tokenRequests, 1, suite.reported.join('\n'));
    assert.equal(new Set(got.map((t) => t.value)).size, 1);
    const dump = await dumpRedis(suite.redis);
    assert.ok(dump.includes(':token:'), 'the token key is in Redis (the checks below can see values)');
    assert.ok(!dump.includes(got[0].value), 'the token is sealed in Redis, never in clear');
    assert.ok(!dump.includes(CLIENT_SECRET), 'the client secret never goes to Redis');
    caches.forEach((c) => c.close());
  });

  it('one token request per lifetime across three replicas (renewed once for the fleet, not once per replica)', async () => {
    sim = await startSimulator({ tokenLifetimeSec: 1 });
    let fetched = 0;
    const fetch = simulatorToken(sim);
    const counted = () => ((fetched += 1), fetch());
    const opts = { renewMarginMs: 1_000, minLifetimeMs: 300 };
    const replicas = [suite.replica({ token: opts }), suite.replica({ token: opts }), suite.replica({ token: opts })];
    const caches = replicas.map((f) => new TokenCache(() => f.tokens.fetch(counted, IDENTITY), opts));
    const values = new Set<string>();
    const until = Date.now() + 2_300;
    while (Date.now() < until) {
      for (const c of caches) values.add((await c.get()).value);
      await sleep(20);
    }
    // 1 s tokens renewed 0.1 s before their end, over 2.3 s: 3 requests for the fleet (alone, each replica would make 3).
    assert.equal(sim.counters.tokenRequests, fetched);
    assert.ok(fetched >= 2 && fetched <= 4, `token requests: ${fetched}`);
    assert.equal(values.size, fetched, 'every replica used the tokens the fleet fetched, and no other');
    caches.forEach((c) => c.close());
  });

  it('a 401 forgets the refused token in Redis too, and the next fetch gets a new one', async () => {
    sim = await startSimulator();
    const fetch = simulatorToken(sim);
    const [a, b] = [suite.replica(), suite.replica()];
    const first = await a.tokens.fetch(fetch, IDENTITY);
    assert.equal(first.source, 'fetched');
    assert.equal((await b.tokens.fetch(fetch, IDENTITY)).accessToken, first.accessToken);
    await b.tokens.invalidate('some-other-token', IDENTITY); // not the stored one: kept
    assert.equal((await a.tokens.fetch(fetch, IDENTITY)).source, 'fleet');
    await b.tokens.invalidate(first.accessToken, IDENTITY);
    const next = await a.tokens.fetch(fetch, IDENTITY);
    assert.equal(next.source, 'fetched');
    assert.notEqual(next.accessToken, first.accessToken);
    assert.equal(sim.counters.tokenRequests, 2);
  });

  it('a failed token request frees the lock: the error reaches the caller, and the next try asks again', async () => {
    sim = await startSimulator();
    const fetch = simulatorToken(sim);
    const a = suite.replica();
    let fail = true;
    const flaky = (): Promise<TokenResponse> => (fail ? Promise.reject(new Error('token endpoint down')) : fetch());
    await assert.rejects(a.tokens.fetch(flaky, IDENTITY), /token endpoint down/);
    fail = false;
    const b = suite.replica();
    assert.equal((await b.tokens.fetch(flaky, IDENTITY)).source, 'fetched', 'no stale lock holds the next replica up');
  });

  it('with Redis away, a replica fetches its own token (source local) and says so', async () => {
    sim = await startSimulator();
    const a = suite.replica();
    await a.connection.open();
    await suite.redis.stop();
    const res = await a.tokens.fetch(simulatorToken(sim), IDENTITY);
    assert.equal(res.source, 'local');
    assert.equal(sim.counters.tokenRequests, 1);
    assert.ok(suite.reported.some((t) => /shared token could not be used/.test(t)), suite.reported.join('\n'));
  });

  it('a lock SET whose reply is lost to a reconnect: read back, found ours, the token is fetched for the fleet at once (not after the lock lapses)', async () => {
    sim = await startSimulator();
    const nemesis = await RedisNemesis.start(suite.redis.port);
    try {
      const opts = { lockMs: 4_000 };
      const a = suite.replica({ url: nemesis.urlFor(suite.redis.url), token: opts });
      const b = suite.replica({ token: opts });
      await Promise.all([a.connection.open(), b.connection.open()]);
      // Only the lock's SET loses its reply: it reaches Redis and runs there; the reconnect drops its answer.
      const run = a.connection.run.bind(a.connection);
      a.connection.run = ((what: string, op: Parameters<typeof run>[1]) => {
        if (what === 'taking the token lock' && nemesis.mode === 'pass' && nemesis.accepted === 1) {
          nemesis.withhold();
          setTimeout(() => nemesis.heal(), 150);
        }
        return run(what, op);
      }) as typeof run;
      const fetch = simulatorToken(sim);
      const first = await a.tokens.fetch(fetch, IDENTITY);
      assert.ok(nemesis.log.some((l) => l.endsWith('withhold')), 'the fault was made');
      const second = await b.tokens.fetch(fetch, IDENTITY);
      assert.deepEqual([first.source, second.source], ['fetched', 'fleet'], suite.reported.join('\n'));
      assert.equal(second.accessToken, first.accessToken);
      assert.equal(sim.counters.tokenRequests, 1, 'one token request for the fleet');
    } finally {
      await nemesis.close();
    }
  });
});
