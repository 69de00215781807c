/**
 * Three real Node-RED replicas watching 30 tokens through one Redis; replica
 * 0 reaches the service through its own proxy (HTTP_PROXY), as a replica in
 * another network segment does. When that proxy answers in its own words
 * (Squid's 503 page), resets or says nothing while the other replicas get
 * answers, replica 0 gives its tokens to them: no token goes unanswered for
 * longer than a bound. Its share comes back once the proxy forwards again.
 * When the service fails for everyone, nobody stands down.
 */
import assert from 'node:assert/strict';
import type { ChargingServiceSimulator } from '../../simulator/simulator';
import { delay, startSimulator, until, type FlowNode } from '../harness';
import { RedisServer, requireRedis } from '../redis-server';
import { TestProxy } from '../proxy-server';
import { arrivals, FAST_FLEET, longestGap, recorder, REPLICA_HEADER, Replicas } from '../fleet-replicas';

const N = 3;
const INTERVAL_MS = 1000;
const WATCHED = Array.from({ length: 30 }, (_, i) => `R-${String(i).padStart(2, '0')}`);
const { cycleMs: CYCLE_MS, leaseMs: LEASE_MS } = FAST_FLEET;
/** the request timeout of the configuration, s: a proxy that says nothing costs this per poll */
const TIMEOUT_S = 2;

function flowFor(sim: ChargingServiceSimulator): FlowNode[] {
  return [
    { id: 'tab', type: 'tab', label: 'reach' },
    { id: 'svc', type: 'charging-service', name: 'reach', baseUrl: sim.baseUrl, authUrl: sim.authUrl, scope: '', timeout: TIMEOUT_S, apiKeyHeader: REPLICA_HEADER, fleetKey: 'reach-test' },
    { id: 'watch-in', type: 'inject', z: 'tab', props: [{ p: 'payload' }, { p: 'topic', vt: 'str' }], topic: 'watch', payload: '[]', payloadType: 'json', repeat: '', once: false, x: 100, y: 100, wires: [['w']] },
    { id: 'w', type: 'charging-progress', z: 'tab', service: 'svc', mode: 'watch', interval: INTERVAL_MS / 1000, x: 400, y: 100, wires: [['recW']] },
    recorder('recW', 700, 100),
  ];
}

describe('a replica cut off from the service by its own proxy, judged against its peers (three Node-RED processes)', function () {
  this.timeout(120_000);
  let sim: ChargingServiceSimulator;
  let redis: RedisServer;
  let proxy: TestProxy;
  let fleet: Replicas;

  before(async function () {
    requireRedis(this);
    this.timeout(90_000);
    sim = await startSimulator({ startDelayMs: 0, stopDelayMs: 0, keepRequests: 200_000 });
    redis = await RedisServer.start();
    proxy = await new TestProxy().start();
    const settings = `    chargingSession: { minPollIntervalSec: 0.2, fleet: { cycleMs: ${CYCLE_MS}, leaseMs: ${LEASE_MS} } },`;
    fleet = await Replicas.prepare(N, flowFor(sim), settings, { svc: { coordination: redis.url } }, ['svc']);
    fleet.procs[0].env = { HTTP_PROXY: proxy.url, http_proxy: proxy.url };
    await fleet.startAll();
    await Promise.all(fleet.procs.map((_, i) => fleet.inject(i, 'watch-in', [{ p: 'payload', v: JSON.stringify(WATCHED), vt: 'json' }, { p: 'topic', v: 'watch', vt: 'str' }])));
    const from = sim.requests.length;
    await until(() => new Set(arrivals(sim, from, 'GET').map((a) => a.replica)).size === N, 'all three replicas poll', 20_000);
  });

  after(async function () {
    this.timeout(60_000);
    await fleet?.remove();
    await proxy?.stop();
    await redis?.close();
    await sim?.stop();
  });

  /** The replicas answered for each token within [from, to] (by the simulator's arrivals). */
  const pollers = (from: number) => new Set(arrivals(sim, from, 'GET').map((a) => a.replica));

  for (const mode of ['503', 'reset', 'silent'] as const) {
    it(`its proxy ${mode === '503' ? "answers 503 (Squid's page)" : mode === 'reset' ? 'resets every connection' : 'says nothing'}: its tokens go to the peers within a bound, and come back when it forwards again`, async () => {
      assert.ok(pollers(sim.requests.length - 200).has(0), 'replica 0 polls before the fault');
      const from = sim.requests.length;
      const faultAt = Date.now();
      proxy.forwardMode = mode;
      proxy.dropConnections();
      // Three polls in a row missed (each after its 4 attempts, a timeout each when nothing answers, and their pauses),
      // a peer's answer two seconds (the margin for its lag) after that, seen for three seconds, a lease, a cycle, an interval.
      const missMs = (mode === 'silent' ? 4 * TIMEOUT_S * 1000 : 0) + 1750 + 2000 + 3000 + CYCLE_MS;
      const bound = missMs + LEASE_MS + 3 * CYCLE_MS + 2 * INTERVAL_MS;
      await delay(bound + 3 * INTERVAL_MS);
      const gap = longestGap(arrivals(sim, from, 'GET'), WATCHED, faultAt, Date.now());
      console.log(`      ${mode}: longest unanswered ${gap.ms} ms (bound ${bound} ms)`);
      // A second more for three Node-REDs on two cores.
      assert.ok(gap.ms <= bound + 1000, `${gap.token} unanswered for ${gap.ms} ms (bound ${bound} ms)`);
      assert.match(fleet.log(0), /gives its watched tokens and control targets to the others/);
      proxy.forwardMode = 'normal';
      const back = sim.requests.length;
      await until(() => pollers(back).has(0), 'replica 0 polls again', 15_000);
      await delay(2 * INTERVAL_MS);
      const settled = sim.requests.length;
      await delay(2 * INTERVAL_MS);
      const share = arrivals(sim, settled, 'GET').filter((a) => a.replica === 0).map((a) => a.token);
      assert.ok(new Set(share).size >= 4, `replica 0 polls its share again (${new Set(share).size} tokens)`);
    });
  }

  it('the service fails for everyone (503 to every poll): nobody stands down, and every replica keeps its share', async () => {
    const logBefore = fleet.procs.map((_, i) => fleet.log(i).length);
    sim.inject({ target: 'get', kind: 'status', status: 503, body: '{"error":"unavailable"}', times: Infinity });
    await delay(4_000);
    sim.clearFaults();
    const from = sim.requests.length;
    await delay(2 * INTERVAL_MS);
    for (let i = 0; i < N; i++) {
      const said = fleet.log(i).slice(logBefore[i]);
      assert.doesNotMatch(said, /gives its watched tokens/, `replica ${i} stood down: ${said.split('\n').filter((l) => /gives its watched/.test(l)).join(' | ')}`);
    }
    assert.equal(pollers(from).size, N, 'all three poll right after the outage');
  });
});
