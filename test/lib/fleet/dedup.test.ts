/**
 * The same START sent once by the fleet: three replicas produce it at once
 * (an inject on every copy), each through its own ServiceClient to the
 * simulator, which counts what arrives.
 */
import assert from 'node:assert/strict';
import { startCommand } from '../../../nodes/lib/session/commands';
import { ChargingError } from '../../../nodes/lib/errors';
import type { ChargingServiceSimulator } from '../../../simulator/simulator';
import type { ServiceClient } from '../../../nodes/lib/client/service-client';
import { clientFor, startSimulator } from '../../harness';
import { fleetSuite, sleep, runCommand, claimCommand } from './fleet-fixture';

describe('fleet: the same command sent once (real Redis, simulator)', function () {
  this.timeout(20_000);
  const suite = fleetSuite();
  let sim: ChargingServiceSimulator;
  const clients: ServiceClient[] = [];
  beforeEach(async () => {
    sim = await startSimulator();
  });
  afterEach(async () => {
    for (const c of clients.splice(0)) await c.close();
    await sim.stop();
  });
  const client = () => {
    const c = clientFor(sim, { timeoutMs: 5_000 });
    clients.push(c);
    return c;
  };

  it('three replicas produce the same START: one is sent, the other two get its outcome', async () => {
    const cmd = startCommand({ locationId: 'LOC-1', evseId: '1', token: 'RFID-DUP' });
    const replicas = [suite.replica(), suite.replica(), suite.replica()];
    await Promise.all(replicas.map((f) => f.connection.open()));
    const results = await Promise.all(replicas.map((f) => runCommand(f, cmd, () => client().sendCommand(cmd), 10_000)));
    assert.equal(sim.counters.starts, 1, 'one START arrived');
    assert.equal(sim.counters.startArrivals, 1);
    const sent = results.filter((r) => r.role === 'sent');
    const dups = results.filter((r) => r.role === 'duplicate');
    assert.equal(sent.length, 1);
    assert.equal(dups.length, 2);
    const sender = sent[0].role === 'sent' ? sent[0] : null;
    for (const d of dups) {
      assert.ok(d.role === 'duplicate' && d.outcome.ok);
      assert.deepEqual(d.outcome.ok && d.outcome.result, JSON.parse(JSON.stringify(sender?.result)), 'the sender\'s outcome, as it got it');
      assert.ok(replicas.some((f) => f.replicaId === d.from));
    }
  });

  it('a failed send: the sender gets its error, the duplicates get it as data (code and message)', async () => {
    const cmd = startCommand({ locationId: 'LOC-1', evseId: '1', token: 'RFID-FAIL' });
    sim.inject({ target: 'post', kind: 'status', status: 400, body: '{"error":"invalid_request","message":"unknown connector"}', times: Infinity });
    const replicas = [suite.replica(), suite.replica()];
    await Promise.all(replicas.map((f) => f.connection.open()));
    const results = await Promise.allSettled(replicas.map((f) => runCommand(f, cmd, () => client().sendCommand(cmd), 10_000)));
    const rejected = results.filter((r) => r.status === 'rejected');
    assert.equal(rejected.length, 1);
    assert.ok(rejected[0].status === 'rejected' && rejected[0].reason instanceof ChargingError);
    const dup = results.find((r) => r.status === 'fulfilled');
    assert.ok(dup?.status === 'fulfilled' && dup.value.role === 'duplicate' && !dup.value.outcome.ok);
    assert.equal(dup.value.outcome.ok === false && dup.value.outcome.error.code, 'HTTP');
    assert.equal(sim.counters.startArrivals, 1);
  });

  it('the same START on another connector is another command; the same one after the window is sent again', async () => {
    const a = suite.replica({ claims: { windowMs: 200 } });
    await a.connection.open();
    const one = startCommand({ locationId: 'LOC-1', evseId: '1', token: 'T' });
    const other = { ...one, evseId: '2' };
    const c1 = await claimCommand(a, one, 1_000);
    const c2 = await claimCommand(a, other, 1_000);
    assert.equal(c1.role, 'sender');
    assert.equal(c2.role, 'sender');
    if (c1.role === 'sender') await c1.publish({ ok: true, result: { statusCode: 201 } });
    const again = await claimCommand(a, one, 1_000);
    assert.equal(again.role, 'duplicate', 'inside the window');
    await sleep(300);
    assert.equal((await claimCommand(a, one, 1_000)).role, 'sender', 'after the window');
  });

  it('a sender that never reports: duplicates get a clear marker, by their deadline or when its claim lapses', async () => {
    const cmd = startCommand({ locationId: 'LOC-1', evseId: '1', token: 'RFID-SILENT' });
    const [a, b] = [suite.replica({ claims: { sendMs: 600, windowMs: 100 } }), suite.replica()];
    await Promise.all([a.connection.open(), b.connection.open()]);
    assert.equal((await claimCommand(a, cmd, 1_000)).role, 'sender'); // and then nothing: it died
    const early = await claimCommand(b, cmd, 150);
    assert.equal(early.role, 'unknown');
    assert.ok(early.role === 'unknown' && early.reason === 'timeout' && early.from === a.replicaId && /may have been sent/.test(early.message));
    const late = await claimCommand(b, cmd, 5_000);
    assert.ok(late.role === 'unknown' && late.reason === 'sender-gone', JSON.stringify(late));
  });

  it('Redis away: the command is sent without deduplication, and the caller is warned', async () => {
    const cmd = startCommand({ locationId: 'LOC-1', evseId: '1', token: 'RFID-NOREDIS' });
    const a = suite.replica();
    await a.connection.open();
    await suite.redis.stop();
    const warned: string[] = [];
    const res = await runCommand(a, cmd, () => client().sendCommand(cmd), 1_000, (e) => warned.push(e.message));
    assert.ok(res.role === 'sent' && res.deduplicated === false);
    assert.equal(sim.counters.startArrivals, 1);
    assert.equal(warned.length, 1);
    assert.match(warned[0], /Redis/);
  });
});
