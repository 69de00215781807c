/**
 * The books across real restarts of a real Node-RED process (localfilesystem
 * store): a restart mid-session books the session once, with its whole
 * energy; a kill -9 right after `ended` never books it twice, whether the
 * store kept the record (the watch node's state was older: its `ended` comes
 * again and is recognised) or lost it with everything else of the last
 * seconds (booked again with the same recordId and revision: an upsert).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import type { ServiceClient } from '../../nodes/lib/client/service-client';
import type { ChargingServiceSimulator } from '../../simulator/simulator';
import { clientFor, delay, startSimulator, until } from '../harness';
import { RedProcess } from '../red-process';

const TARIFFS = JSON.stringify([{ id: 'flat', currency: 'EUR', pricePerKWh: 0.3 }]);

function flow(sim: ChargingServiceSimulator): unknown[] {
  return [
    { id: 'tabw', type: 'tab', label: 'watch' },
    { id: 'tabl', type: 'tab', label: 'books' },
    { id: 'svc', type: 'charging-service', name: 'sim', baseUrl: sim.baseUrl, authUrl: sim.authUrl, scope: '' },
    { id: 'w', type: 'charging-progress', z: 'tabw', service: 'svc', mode: 'watch', watchTokens: 'PR-1', interval: 0.3, contextStore: 'file', wires: [['lin', 'elog']] },
    { id: 'elog', type: 'function', z: 'tabw', func: "node.warn('EVENT ' + msg.event); return null;", outputs: 1, wires: [[]] },
    { id: 'lin', type: 'link out', z: 'tabw', mode: 'link', links: ['lout'], wires: [] },
    { id: 'lout', type: 'link in', z: 'tabl', links: ['lin'], wires: [['books']] },
    { id: 'books', type: 'charging-ledger', z: 'tabl', service: 'svc', contextStore: 'file', timeZone: 'Europe/Berlin', tariffs: TARIFFS, defaultTariff: 'flat', wires: [['rlog'], ['hres']] },
    { id: 'rlog', type: 'function', z: 'tabl', func: "node.warn('RECORD ' + msg.recordId + ' ' + msg.payload.revision + ' ' + msg.payload.energyWh + ' ' + msg.payload.endObserved); return null;", outputs: 1, wires: [[]] },
    { id: 'hin', type: 'http in', z: 'tabl', url: '/books', method: 'get', wires: [['hq']] },
    { id: 'hq', type: 'function', z: 'tabl', func: "msg.topic = 'export'; msg.payload = { month: msg.req.query.month, format: 'json' }; return msg;", outputs: 1, wires: [['books']] },
    { id: 'hres', type: 'http response', z: 'tabl', wires: [] },
  ];
}

describe('charging-ledger across restarts of a real Node-RED process (localfilesystem)', function () {
  this.timeout(120_000);
  let sim: ChargingServiceSimulator;
  let client: ServiceClient;
  let red: RedProcess;
  const records = () => [...red.log.matchAll(/RECORD (\S+) (\d+) (\d+) (\w+)/g)].map((m) => ({ id: m[1], revision: Number(m[2]), energyWh: Number(m[3]), endObserved: m[4] === 'true' }));
  let seen: Array<ReturnType<typeof records>[number]> = [];
  const month = () => new Intl.DateTimeFormat('en-CA', { timeZone: 'Europe/Berlin', year: 'numeric', month: '2-digit' }).format(new Date()).slice(0, 7);
  const books = async () => (await (await fetch(`http://127.0.0.1:${red.port}/books?month=${month()}`)).json()) as Array<{ recordId: string; revision: number; energyWh: number }>;

  async function start(token: string): Promise<{ transactionId: string; meterStart: number }> {
    await client.sendCommand({ action: 'START', locationId: 'L', evseId: '1', token });
    return rt(token);
  }
  const rt = (token: string) => sim.session(token) as { transactionId: string; meterStart: number };
  async function stop(token: string): Promise<number> {
    const s = sim.session(token)!;
    await client.sendCommand({ action: 'STOP', locationId: 'L', evseId: '1', token, transactionId: s.transactionId });
    return Math.floor(((s.stoppedAt! - s.startedAt) / 3_600_000) * s.powerW) + s.meterStart;
  }
  async function restart(signal: NodeJS.Signals): Promise<void> {
    seen = seen.concat(records());
    await red.stop(signal);
    await red.start();
  }

  before(async () => {
    sim = await startSimulator({ startDelayMs: 0, stopDelayMs: 0, powerW: 36_000 });
    client = clientFor(sim);
    red = await RedProcess.prepare('charging-ledger-', flow(sim), "    contextStorage: { default: { module: 'memory' }, file: { module: 'localfilesystem', config: { flushInterval: 2 } } },\n    chargingSession: { minPollIntervalSec: 0.2 },");
    await red.start();
  });

  after(async () => {
    await red?.remove();
    await client?.close();
    await sim?.stop();
  });

  it('a restart mid-session: one record, with the energy of the whole session', async () => {
    const s = await start('PR-1');
    await until(() => red.count(/EVENT started/g) === 1 && red.count(/EVENT updated/g) >= 2, 'started and updated', 15_000);
    await restart('SIGINT');
    await until(() => red.count(/EVENT updated/g) >= 1, 'updated after the restart', 15_000);
    const meterEnd = await stop('PR-1');
    await until(() => records().length >= 1, 'the record', 15_000);
    await delay(1500);
    const all = seen.concat(records()).filter((r) => r.id === s.transactionId);
    assert.equal(all.length, 1, red.log);
    assert.ok(Math.abs(all[0].energyWh - (meterEnd - s.meterStart)) <= 20, `the whole session: ${all[0].energyWh} of ${meterEnd - s.meterStart}`);
    assert.equal((await books()).filter((r) => r.recordId === s.transactionId).length, 1);
  });

  it('kill -9 after ended, the record kept but the watch state older: the replayed ended books nothing', async () => {
    const s = await start('PR-1');
    await until(() => red.count(/EVENT started/g) >= 1 && red.count(/EVENT updated/g) >= 1, 'started', 15_000);
    await delay(3_000); // the watch node's state (session running) is on disk
    const watchFile = path.join(red.dataDir, 'context', 'tabw', 'flow.json');
    const mid = fs.readFileSync(watchFile);
    await stop('PR-1');
    await until(() => records().some((r) => r.id === s.transactionId), 'the record', 15_000);
    await delay(3_000); // the record is on disk
    seen = seen.concat(records());
    await red.stop('SIGKILL');
    fs.writeFileSync(watchFile, mid); // as if the watch node's last write had not reached the disk
    await red.start();
    await until(() => red.count(/EVENT ended/g) >= 1, 'the ended of the session again', 15_000);
    await delay(1500);
    const all = seen.concat(records()).filter((r) => r.id === s.transactionId);
    assert.equal(all.length, 1, `one record in all outputs:\n${red.log}`);
    assert.equal((await books()).filter((r) => r.recordId === s.transactionId).length, 1);
  });

  it('kill -9 right after ended, everything of the last seconds lost: the same recordId and revision, one row in the books', async () => {
    const s = await start('PR-1');
    await until(() => red.count(/EVENT started/g) >= 1, 'started', 15_000);
    await delay(3_000);
    await stop('PR-1');
    await until(() => records().some((r) => r.id === s.transactionId), 'the record', 15_000);
    seen = seen.concat(records());
    await red.stop('SIGKILL'); // inside localfilesystem's flush interval
    await red.start();
    await until(() => records().some((r) => r.id === s.transactionId), 'booked again from the replayed ended', 15_000);
    const all = seen.concat(records()).filter((r) => r.id === s.transactionId);
    assert.deepEqual(new Set(all.map((r) => r.revision)), new Set([1]), 'one revision: an upsert by recordId and revision keeps one row');
    assert.equal((await books()).filter((r) => r.recordId === s.transactionId).length, 1);
  });
});
