/**
 * charging-ledger in a real Node-RED runtime, attacked: CDRs and credits by
 * every id they may carry, exports of one token, a store that refuses writes
 * or answers after the node closed (a redeploy between writing a record and
 * sending it), hostile commands. The books live in a test store that outlives
 * a flow's unload, as a disk does (test/faulty-context-store.ts).
 */
import assert from 'node:assert/strict';
import { faultyContextStore, storeFaults } from '../faulty-context-store';
import { delay, helper, load, loggedText, runtimeSuite, send, Sink, statusCalls, until } from '../harness';

const TARIFFS = [{ id: 'home', currency: 'EUR', pricePerKWh: 0.3, windows: [{ days: 'mon-sun', from: '22:00', to: '06:00', pricePerKWh: 0.2 }] }];
const TOKENS = [{ token: 'LED-1', label: 'Anna', vehicle: 'B-XY 123', tariff: 'home' }];

const FLOW = (extra: Record<string, unknown> = {}) => [
  { id: 'ledger', type: 'charging-ledger', contextStore: 'books', timeZone: 'Europe/Berlin', tokens: JSON.stringify(TOKENS), tariffs: JSON.stringify(TARIFFS), defaultTariff: 'home', wires: [['records'], ['answers']], ...extra },
  { id: 'catcher', type: 'catch', scope: null, uncaught: false, wires: [['caught']] },
  ...['records', 'answers', 'caught'].map((id) => ({ id, type: 'helper' })),
];

/** A watch node's `ended` for a session of the service's clock. */
function ended(transactionId: string, start: string, end: string, startWh: number, endWh: number, more: Record<string, unknown> = {}): Record<string, unknown> {
  const session = { transactionId, cdrId: `CDR-${transactionId}`, token: 'LED-1', locationId: 'L', evseId: '1', meterStart: startWh, meterEnd: endWh, startedAt: start, updatedAt: end.replace(/Z$/, ''), endObserved: true, ...more };
  return { event: 'ended', session };
}

/**
 * helper.load starts the flows on a context that has only the memory store
 * (it skips Node-RED's loading of settings.contextStorage): the configured
 * stores are loaded here before the nodes start, as Node-RED's own start does.
 */
async function loadWithStores(sim: Parameters<typeof load>[0], nodes: Parameters<typeof load>[1]): Promise<void> {
  const red = (helper as unknown as { _redNodes: { startFlows: (...a: unknown[]) => Promise<unknown>; loadContextsPlugin: () => Promise<void> } })._redNodes;
  const start = red.startFlows;
  red.startFlows = async (...a: unknown[]) => {
    await red.loadContextsPlugin();
    return start.apply(red, a);
  };
  try {
    await load(sim, nodes);
  } finally {
    red.startFlows = start;
  }
}

type Rec = Record<string, unknown> & { recordId: string; revision: number; energyWh: number; cost: number | null; source: string };

describe('charging-ledger attacked (runtime)', function () {
  this.timeout(20_000);
  const rt = runtimeSuite({}, { contextStorage: { default: { module: 'memory' }, books: { module: faultyContextStore } } });
  beforeEach(() => storeFaults.reset());
  afterEach(() => storeFaults.reset());

  const records = () => Sink.of('records').messages;
  const caught = () => Sink.of('caught').messages;

  /** A command's answer, or its error's code and message when it went to Catch. */
  async function ask(topic: string, payload: unknown): Promise<{ payload?: Record<string, unknown> & { record?: Rec }; code?: string; message?: string }> {
    const [a, c] = [Sink.of('answers').messages.length, caught().length];
    send('ledger', { topic, payload });
    await until(() => Sink.of('answers').messages.length > a || caught().length > c, `an answer to ${topic}`);
    if (caught().length > c) {
      const error = caught()[c].error as { code: string; message: string };
      return { code: error.code, message: error.message };
    }
    return { payload: Sink.of('answers').messages[a].payload as Record<string, unknown> & { record?: Rec } };
  }

  async function book(msg: Record<string, unknown>, n: number): Promise<Rec> {
    send('ledger', msg);
    await until(() => records().length >= n, `record ${n}`);
    return records()[n - 1].payload as Rec;
  }
  it('a CDR applied by transactionId is found again by its own id: get, and the credit that references it', async () => {
    await loadWithStores(rt.sim, FLOW());
    const rec = await book(ended('TX-A', '2026-02-03T08:00:00Z', '2026-02-03T09:00:00Z', 0, 6_000, { cdrId: null }), 1);
    assert.equal(rec.cdrId, null, 'the service gave this session no CDR id');
    const first = await ask('cdr', { transactionId: 'TX-A', cdrId: 'CPO-9', energyKWh: 5, totalCost: 2, currency: 'EUR' });
    assert.equal(first.payload?.changed, true);
    const got = await ask('get', { cdrId: 'CPO-9' });
    assert.equal(got.code, undefined, `get by the CDR's id: ${got.code} ${got.message}`);
    assert.deepEqual([got.payload?.revision, got.payload?.cdrId, got.payload?.source], [2, 'CPO-9', 'cdr']);
    const credit = await ask('cdr', { cdrId: 'CPO-9-C', credit: true, credit_reference_id: 'CPO-9', energyKWh: -5, totalCost: -2, currency: 'EUR' });
    assert.equal(credit.code, undefined, `the credit: ${credit.code} ${credit.message}`);
    assert.deepEqual([credit.payload?.record?.revision, credit.payload?.record?.energyWh, credit.payload?.record?.source], [3, 6_000, 'meter']);
    assert.equal(records().length, 3);
  });
  it('an export of one token\'s sessions does not make the month exported: a later CDR of another token amends nothing', async () => {
    await loadWithStores(rt.sim, FLOW());
    await book(ended('TX-B', '2026-02-03T08:00:00Z', '2026-02-03T09:00:00Z', 0, 6_000), 1);
    await book(ended('TX-C', '2026-02-04T08:00:00Z', '2026-02-04T09:00:00Z', 0, 4_000, { token: 'LED-2' }), 2);
    const one = await ask('export', { month: '2026-02', token: 'LED-1' });
    assert.equal(String(one.payload).trim().split('\r\n').length, 2, 'header and LED-1\'s row');
    assert.equal((await ask('cdr', { transactionId: 'TX-C', energyKWh: 3, totalCost: 0.9, currency: 'EUR' })).payload?.changed, true);
    const report = (await ask('report', { month: '2026-02' })).payload!;
    assert.deepEqual([report.amended, report.changes], [false, []], 'the month was never exported whole');
    await ask('export', { month: '2026-02' });
    await ask('cdr', { transactionId: 'TX-B', energyKWh: 5, totalCost: 1.5, currency: 'EUR' });
    const after = (await ask('report', { month: '2026-02' })).payload!;
    assert.equal(after.amended, true, 'exported whole, then changed');
    assert.deepEqual((after.changes as Array<{ recordId: string }>).map((c) => c.recordId), ['TX-B']);
  });
  it('a redeploy between writing a record and sending it: the record is sent once the ledger is back, with its recordId and revision', async () => {
    await loadWithStores(rt.sim, FLOW());
    // The record's write lands at once and answers 400 ms later; the flows stop in between.
    storeFaults.slowPath = '.m[';
    storeFaults.slowMs = 400;
    const end = ended('TX-D', '2026-02-05T08:00:00Z', '2026-02-05T09:00:00Z', 0, 6_000);
    send('ledger', end);
    await delay(100);
    await helper.unload();
    storeFaults.slowPath = null;
    await loadWithStores(rt.sim, FLOW());
    await until(() => records().length >= 1, 'the record, sent when the ledger starts again', 5000);
    // The watch node's ended comes again after a restart when its own state was older than the books: nothing more.
    send('ledger', { ...end });
    await delay(300);
    assert.deepEqual(records().map((m) => [m.event, m.recordId, (m.payload as Rec).revision, (m.payload as Rec).energyWh]), [['record', 'TX-D', 1, 6_000]]);
    await helper.unload();
    await loadWithStores(rt.sim, FLOW());
    send('ledger', { ...end });
    await delay(300);
    assert.equal(records().length, 0, 'sent once: a later start and a later repeat send nothing');
    assert.equal(caught().length, 0);
  });
  it('a context store that refuses writes: CONFIG at Catch naming the store, no record value, nothing sent; booked once when it takes writes again', async () => {
    await loadWithStores(rt.sim, FLOW());
    storeFaults.refuse = '.m[';
    const end = ended('TX-E', '2026-02-06T08:00:00Z', '2026-02-06T09:00:00Z', 0, 6_000);
    send('ledger', end);
    await until(() => caught().length === 1, 'the error at Catch');
    const error = caught()[0].error as { code: string; message: string };
    assert.equal(error.code, 'CONFIG', error.message);
    assert.match(error.message, /context store/);
    assert.match(error.message, /the disk is full/);
    const shown = JSON.stringify(caught().map((m) => m.error)) + JSON.stringify(statusCalls('ledger')) + loggedText();
    for (const v of ['TX-E', 'CDR-TX-E', 'LED-1', 'Anna']) assert.ok(!shown.includes(v), `${v} must not be in an error, log or badge`);
    assert.equal(records().length, 0);
    storeFaults.refuse = null;
    send('ledger', { ...end });
    await until(() => records().length === 1, 'the record once the store takes writes');
    send('ledger', { ...end });
    await delay(300);
    assert.equal(records().length, 1);
    assert.equal((records()[0].payload as Rec).energyWh, 6_000);
  });
  it('held: hostile commands get a code at Catch and change nothing; __proto__ ids are ids; one record for ended twice at once', async () => {
    await loadWithStores(rt.sim, FLOW());
    const bad = [
      ['report', { month: '2026-13' }],
      ['export', { from: '2026-03', to: '2026-01' }],
      ['export', { month: '2026-02', format: 'xlsx' }],
      ['export', { from: '2020-01', to: '2026-01' }],
      ['cdr', { cdrId: 'NOPE', energyKWh: 1 }],
      ['tariffs', JSON.parse('[{"id":"__proto__","currency":"EUR","pricePerKWh":-1}]')],
      ['tokens', 'not a table'],
      ['purge', { before: '26-01' }],
    ] as const;
    const codes = [];
    for (const [topic, payload] of bad) codes.push((await ask(topic, payload)).code);
    assert.deepEqual(codes, ['INVALID_INPUT', 'INVALID_INPUT', 'INVALID_INPUT', 'INVALID_INPUT', 'NO_RECORD', 'INVALID_INPUT', 'INVALID_INPUT', 'INVALID_INPUT']);
    // The watch node's and the stop node's ended in the same millisecond: one record.
    const end = ended('__proto__', '2026-02-07T08:00:00Z', '2026-02-07T09:00:00Z', 0, 3_000);
    send('ledger', end);
    send('ledger', { outcome: 'ended', stopAttempts: 1, payload: {}, session: end.session });
    await until(() => records().length === 1, 'the record');
    const polluting = JSON.parse('{"__proto__": {"month": "2026-01", "polluted": true}, "month": "2026-02"}');
    const report = (await ask('report', polluting)).payload!;
    assert.deepEqual([report.month, report.sessions], ['2026-02', 1]);
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
    assert.equal((await ask('get', { transactionId: '__proto__' })).payload?.energyWh, 3_000);
    assert.equal((await ask('get', { transactionId: 'constructor' })).code, 'NO_RECORD');
    const huge = await ask('export', { month: '2026-02', token: 'x'.repeat(5_000_000) });
    assert.equal(String(huge.payload).split('\r\n').length, 2, 'the header alone');
    await delay(200);
    assert.equal(records().length, 1);
  });

  it('held: forget, then a CDR for that token\'s session keeps it forgotten; purge never drops the previous month', async () => {
    await loadWithStores(rt.sim, FLOW());
    const now = new Date();
    const monthStart = (back: number) => new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - back, 10, 8)).toISOString();
    await book(ended('TX-F', monthStart(1), monthStart(1).replace('T08', 'T09'), 0, 2_000), 1);
    await book(ended('TX-G', monthStart(3), monthStart(3).replace('T08', 'T09'), 0, 2_000), 2);
    const forgot = (await ask('forget', { token: 'LED-1' })).payload!;
    assert.match(String(forgot.token), /^forgotten:[0-9a-f]{16}$/);
    assert.equal(forgot.records, 2);
    const cdr = await ask('cdr', { transactionId: 'TX-F', energyKWh: 1.5, totalCost: 0.45, currency: 'EUR' });
    assert.deepEqual([cdr.payload?.record?.token, cdr.payload?.record?.label, cdr.payload?.record?.vehicle], [forgot.token, '', '']);
    assert.ok(!JSON.stringify(records().slice(2)).includes('LED-1'), 'the corrected record names no token');
    const purged = (await ask('purge', { before: monthStart(-1).slice(0, 7) })).payload!;
    assert.deepEqual([purged.months, purged.records], [[monthStart(3).slice(0, 7)], 1]);
    assert.equal((await ask('get', { transactionId: 'TX-F' })).payload?.revision, 2, 'the previous month stays');
    assert.equal((await ask('get', { transactionId: 'TX-G' })).code, 'NO_RECORD');
  });
  it('a CDR for a session still open: NO_RECORD that says so (its record is made at its end), and nothing changes', async () => {
    await loadWithStores(rt.sim, FLOW());
    const start = ended('TX-H', '2026-02-08T08:00:00Z', '2026-02-08T08:30:00Z', 0, 1_000);
    send('ledger', { ...start, event: 'started' });
    const early = await ask('cdr', { transactionId: 'TX-H', energyKWh: 2, totalCost: 0.6, currency: 'EUR' });
    assert.equal(early.code, 'NO_RECORD');
    assert.match(String(early.message), /still open/);
    assert.ok(!String(early.message).includes('TX-H'));
    const rec = await book(ended('TX-H', '2026-02-08T08:00:00Z', '2026-02-08T09:00:00Z', 0, 2_500), 1);
    assert.deepEqual([rec.revision, rec.energyWh, rec.source], [1, 2_500, 'meter']);
    assert.equal((await ask('cdr', { transactionId: 'TX-H', energyKWh: 2, totalCost: 0.6, currency: 'EUR' })).payload?.changed, true);
  });
});
