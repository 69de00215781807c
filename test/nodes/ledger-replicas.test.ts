/**
 * Two real Node-RED replicas, one simulator, one Redis for the fleet and for
 * the books (a context store they share, test/redis-context-store.ts): the
 * holder of the watched token is killed mid-session, the other takes the
 * token over, sees the end and books it: one record in the union of the
 * outputs. And an `ended` that reaches both ledgers at once is booked by one.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import type { ServiceClient } from '../../nodes/lib/client/service-client';
import type { ChargingServiceSimulator } from '../../simulator/simulator';
import { CLIENT_ID, CLIENT_SECRET, clientFor, delay, startSimulator, until, type FlowNode } from '../harness';
import { RedisServer, requireRedis } from '../redis-server';
import { FAST_FLEET, Replicas } from '../fleet-replicas';

const STORE = path.join(__dirname, '..', 'redis-context-store.js');

function flowFor(sim: ChargingServiceSimulator): FlowNode[] {
  return [
    { id: 'tab', type: 'tab', label: 'ledger replicas' },
    { id: 'svc', type: 'charging-service', name: 'fleet', baseUrl: sim.baseUrl, authUrl: sim.authUrl, scope: '', timeout: 10, fleetKey: 'ledger-test' },
    { id: 'w', type: 'charging-progress', z: 'tab', service: 'svc', mode: 'watch', watchTokens: 'RL-1', interval: 0.3, wires: [['books', 'evt']] },
    { id: 'evt', type: 'function', z: 'tab', func: "node.log('EVT ' + msg.event + ' ' + (msg.session && msg.session.transactionId)); return null;", outputs: 1, wires: [[]] },
    { id: 'both', type: 'inject', z: 'tab', props: [{ p: 'event', v: 'ended', vt: 'str' }, { p: 'session', v: '{}', vt: 'json' }], repeat: '', once: false, wires: [['books']] },
    { id: 'books', type: 'charging-ledger', z: 'tab', service: 'svc', contextStore: 'shared', timeZone: 'Europe/Berlin', wires: [['rec'], []] },
    { id: 'rec', type: 'function', z: 'tab', func: "node.log('REC ' + msg.recordId + ' ' + msg.payload.revision + ' ' + msg.payload.energyWh); return null;", outputs: 1, wires: [[]] },
    { id: 'catcher', type: 'catch', z: 'tab', scope: null, uncaught: false, wires: [['err']] },
    { id: 'err', type: 'function', z: 'tab', func: "node.log('ERR ' + msg.error.code); return null;", outputs: 1, wires: [[]] },
  ];
}

describe('charging-ledger on two replicas with shared books (real processes, Redis)', function () {
  this.timeout(120_000);
  let sim: ChargingServiceSimulator;
  let redis: RedisServer;
  let fleet: Replicas;
  let client: ServiceClient;
  const recs = (tx: string) => fleet.procs.flatMap((_, i) => [...fleet.log(i).matchAll(/REC (\S+) (\d+) (\d+)/g)].filter((m) => m[1] === tx).map((m) => ({ replica: i, revision: Number(m[2]), energyWh: Number(m[3]) })));

  before(async function () {
    requireRedis(this);
    sim = await startSimulator({ startDelayMs: 0, stopDelayMs: 0, powerW: 36_000 });
    client = clientFor(sim);
    redis = await RedisServer.start();
    const settings = `    contextStorage: { default: { module: 'memory' }, shared: { module: require(${JSON.stringify(STORE)}), config: { url: ${JSON.stringify(redis.url)} } } },
    chargingSession: { minPollIntervalSec: 0.2, fleet: { cycleMs: ${FAST_FLEET.cycleMs}, leaseMs: ${FAST_FLEET.leaseMs} } },`;
    fleet = await Replicas.prepare(2, flowFor(sim), settings, { svc: { clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, coordination: redis.url } }, []);
    await fleet.startAll();
  });

  after(async function () {
    await fleet?.remove();
    await client?.close();
    await redis?.close();
    await sim?.stop();
  });

  it('the token\'s holder killed mid-session: the other replica books the session once, with the energy it saw last', async () => {
    await client.sendCommand({ action: 'START', locationId: 'L', evseId: '1', token: 'RL-1' });
    const s = sim.session('RL-1')!;
    const updates = (i: number) => (fleet.log(i).match(new RegExp(`EVT updated ${s.transactionId}`, 'g')) ?? []).length;
    await until(() => updates(0) + updates(1) >= 3, 'updated', 20_000);
    // The holder is the replica that reports now (the lease may have moved once as the two joined).
    let holder = -1;
    const before = [updates(0), updates(1)];
    await delay(1200);
    const moved = [updates(0) - before[0], updates(1) - before[1]];
    holder = moved[0] > 0 && moved[1] === 0 ? 0 : moved[1] > 0 && moved[0] === 0 ? 1 : -1;
    assert.notEqual(holder, -1, `one replica reports the token: ${moved.join('/')}`);
    await delay(500); // the open record is in the shared books
    await fleet.kill(holder);
    await client.sendCommand({ action: 'STOP', locationId: 'L', evseId: '1', token: 'RL-1', transactionId: s.transactionId });
    await until(() => recs(s.transactionId).length >= 1, 'the record', 30_000);
    await delay(1500);
    const all = recs(s.transactionId);
    assert.equal(all.length, 1, `one record in the union: ${JSON.stringify(all)}`);
    assert.equal(all[0].replica, 1 - holder, 'booked by the replica that took the token over');
    assert.ok(all[0].energyWh > 0);
    await fleet.start(holder);
  });

  it('an ended that reaches both ledgers at the same moment is booked by one of them', async () => {
    const session = { transactionId: 'TX-BOTH-1', cdrId: 'C-BOTH-1', token: 'RL-2', locationId: 'L', evseId: '2', meterStart: 1000, meterEnd: 4000, startedAt: '2026-03-01T10:00:00Z', updatedAt: '2026-03-01T11:00:00' };
    await Promise.all(fleet.procs.map((_, i) => fleet.inject(i, 'both', [{ p: 'event', v: 'ended', vt: 'str' }, { p: 'session', v: JSON.stringify(session), vt: 'json' }])));
    await until(() => recs('TX-BOTH-1').length >= 1, 'the record', 15_000);
    await delay(2000);
    assert.deepEqual(recs('TX-BOTH-1').map((r) => [r.revision, r.energyWh]), [[1, 3000]]);
    for (let i = 0; i < 2; i++) assert.doesNotMatch(fleet.log(i), /ERR /);
  });
});
