/**
 * A depot across two real Node-RED processes on one Redis: six connectors
 * wanted on by both replicas' flows, a depot of limit 2. The grants are the
 * fleet's (Redis): exactly 2 STARTs, the others queued; then kill -9 of the
 * replica that holds most targets, a write pause of Redis and a freeze: the
 * peak of sessions at once, counted exactly at the simulator, never above 2,
 * and no START twice. Then an off hands the slot on.
 */
import assert from 'node:assert/strict';
import type { ChargingServiceSimulator } from '../../simulator/simulator';
import { delay, startSimulator, until, type FlowNode } from '../harness';
import { RedisServer, requireRedis } from '../redis-server';
import { pauseWrites } from '../redis-nemesis';
import { FAST_FLEET, recorder, REPLICA_HEADER, Replicas } from '../fleet-replicas';
import { depotSessions, target } from './depot-fixture';

const N = 2;
const TARGETS = [1, 2, 3, 4, 5, 6].map(target);
const { cycleMs: CYCLE_MS, leaseMs: LEASE_MS } = FAST_FLEET;

function flowFor(sim: ChargingServiceSimulator): FlowNode[] {
  return [
    { id: 'tab', type: 'tab', label: 'depot' },
    { id: 'svc', type: 'charging-service', name: 'depot', baseUrl: sim.baseUrl, authUrl: sim.authUrl, scope: '', timeout: 5, apiKeyHeader: REPLICA_HEADER, fleetKey: 'depot-replicas' },
    { id: 'dep', type: 'charging-depot', limit: 2, minRun: 1, turn: '0', aging: 3600, idleKWh: 0, idleWindow: 0, overFor: 1, assumedKW: 11, countStation: true, onOver: 'shed' },
    { id: 'wish', type: 'inject', z: 'tab', props: [{ p: 'payload' }, { p: 'topic', vt: 'str' }], topic: 'on', payload: '[]', payloadType: 'json', repeat: '', once: false, x: 100, y: 100, wires: [['split']] },
    { id: 'split', type: 'function', z: 'tab', func: 'for (const t of msg.payload.targets) node.send({ payload: msg.payload.on, target: t });\nreturn null;', outputs: 1, x: 250, y: 100, wires: [['ctl']] },
    { id: 'ctl', type: 'charging-control', z: 'tab', service: 'svc', depot: 'dep', locationId: '', evseId: '', token: '', guard: 0, checkInterval: 0.5, waitTimeout: 2, startAttempts: 2, retryInterval: 600, x: 400, y: 100, wires: [['recK']] },
    { id: 'catch', type: 'catch', z: 'tab', scope: null, uncaught: false, x: 100, y: 200, wires: [['recE']] },
    recorder('recK', 700, 100),
    recorder('recE', 700, 200),
  ];
}

describe('a depot across two Node-RED processes on one Redis (limit 2, six connectors)', function () {
  this.timeout(180_000);
  let sim: ChargingServiceSimulator;
  let redis: RedisServer;
  let fleet: Replicas;
  const peak = () => sim.peakSessions(depotSessions);
  const starts = () => TARGETS.map((t) => sim.arrivals('START', `${t.token}|${t.locationId}|${t.evseId}`));
  const wish = (i: number, on: boolean, targets = TARGETS) => fleet.inject(i, 'wish', [{ p: 'payload', v: JSON.stringify({ on, targets }), vt: 'json' }, { p: 'topic', v: 'on', vt: 'str' }]);
  const charging = () => TARGETS.filter((t) => sim.session(t.token)).length;

  before(async function () {
    requireRedis(this);
    this.timeout(90_000);
    sim = await startSimulator({ startDelayMs: 100, stopDelayMs: 100, keepRequests: 200_000 });
    redis = await RedisServer.start();
    const settings = `    chargingSession: { minPollIntervalSec: 0.1, fleet: { cycleMs: ${CYCLE_MS}, leaseMs: ${LEASE_MS} } },`;
    fleet = await Replicas.prepare(N, flowFor(sim), settings, { svc: { coordination: redis.url } }, ['svc']);
    await fleet.startAll();
  });

  after(async function () {
    this.timeout(60_000);
    await fleet?.remove();
    await redis?.close();
    await sim?.stop();
  });

  it('on wanted on both replicas for six: exactly two STARTs, two sessions, the others queued; peak 2', async () => {
    await Promise.all([wish(0, true), wish(1, true)]);
    await until(() => charging() === 2, 'two charging', 20_000);
    await until(() => fleet.outputs('recK').filter((o) => o.state === 'queued').length >= 4, 'four queued', 10_000);
    await delay(2_000); // four more checks: nobody else starts
    assert.equal(starts().reduce((a, b) => a + b, 0), 2, `STARTs per connector: ${starts().join(' ')}`);
    assert.equal(peak(), 2);
    assert.equal(sim.counters.duplicateStarts, 0);
  });

  it('kill -9 of the replica that holds most targets, then a write pause and a freeze of Redis: never above 2, no START twice', async () => {
    const reports = fleet.outputs('recK');
    const byReplica = [0, 1].map((i) => new Set(reports.filter((o) => o.replica === i).map((o) => JSON.stringify(o))).size);
    const victim = byReplica[0] >= byReplica[1] ? 0 : 1;
    const before = starts().reduce((a, b) => a + b, 0);
    await fleet.kill(victim);
    // The survivor takes the targets over (leases lapse) and holds the grants the dead replica's cars still have.
    await delay(LEASE_MS + 6 * CYCLE_MS + 2_000);
    assert.equal(charging(), 2, 'the two cars charge on');
    await pauseWrites(redis.url, 2_500);
    await delay(3_000);
    redis.freeze();
    await delay(2_000);
    redis.thaw();
    await delay(3_000);
    assert.ok(peak() <= 2, `peak ${peak()}`);
    assert.equal(starts().reduce((a, b) => a + b, 0), before, 'no START while both slots are taken');
    assert.equal(sim.counters.duplicateStarts, 0, 'no START while the token had a session');
    await fleet.start(victim);
  });

  it('an off on one replica hands the slot on: one more START, still never above 2', async () => {
    const on = TARGETS.filter((t) => sim.session(t.token));
    assert.equal(on.length, 2);
    const before = starts().reduce((a, b) => a + b, 0);
    await wish(1, false, [on[0]]);
    await until(() => !sim.session(on[0].token) && charging() === 2, 'the slot handed on', 20_000);
    assert.equal(starts().reduce((a, b) => a + b, 0), before + 1);
    assert.ok(peak() <= 2, `peak ${peak()}`);
  });
});
