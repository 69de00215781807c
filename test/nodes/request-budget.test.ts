/**
 * Max requests per second through the runtime (issue 17.3): watch nodes stretch
 * their schedule to fit, say so once with the figures, and a START still goes
 * first.
 */
import assert from 'node:assert/strict';
import { SESSIONS_PATH } from '../../simulator/simulator';
import { delay, load, loggedText, runtimeSuite, send, Sink } from '../harness';

const SINKS = ['out', 'started', 'caught'].map((id) => ({ id, type: 'helper' }));
const CATCH = { id: 'catcher', type: 'catch', scope: null, uncaught: false, wires: [['caught']] };

describe('Max requests per second (runtime + simulator)', () => {
  const rt = runtimeSuite({}, { chargingSession: { minPollIntervalSec: 0.1 } });

  it('two watch nodes wanting 20 polls/s on a 4/s budget stretch evenly, warn once with the figures, and a START goes first', async () => {
    const tokens = (p: string) => Array.from({ length: 10 }, (_, i) => `${p}-${i}`).join(',');
    await load(
      rt.sim,
      [
        { id: 'w1', type: 'charging-progress', service: 'svc', mode: 'watch', interval: 1, watchTokens: tokens('A'), wires: [['out']] },
        { id: 'w2', type: 'charging-progress', service: 'svc', mode: 'watch', interval: 1, watchTokens: tokens('B'), wires: [['out']] },
        { id: 'start', type: 'charging-start', service: 'svc', wires: [['started']] },
        ...SINKS,
        CATCH,
      ],
      { maxRequestsPerSec: 4 },
    );
    await delay(2500);
    const t0 = Date.now();
    send('start', { payload: { locationId: 'L', evseId: '1', token: 'RB-START' } });
    await Sink.of('started').next(5000);
    const startAt = rt.sim.requests.find((r) => r.method === 'POST' && r.path === SESSIONS_PATH)?.at ?? Infinity;
    await delay(1500);
    const at = rt.sim.requests.filter((r) => r.path === SESSIONS_PATH).map((r) => r.at).sort((a, b) => a - b);
    let most = 0;
    for (let i = 0, j = 0; i < at.length; i++) {
      while (at[i] - at[j] >= 1000) j++;
      most = Math.max(most, i - j + 1);
    }
    assert.ok(most <= 5, `busiest second at the server: ${most} requests (limit 4)`);
    const pollsFirst = rt.sim.requests.filter((r) => r.method === 'GET' && r.at >= t0 && r.at < startAt).length;
    assert.ok(pollsFirst <= 1, `${pollsFirst} polls went out between the START's input and its arrival`);
    const warnings = (loggedText().match(/needs \d+ requests\/s, more than Max requests per second \(4/g) ?? []).length;
    assert.ok(warnings >= 1 && warnings <= 2, `one warning per watch node at most (${warnings})`);
    assert.match(loggedText(), /Watching 10 tokens every 1 s needs 10 requests\/s.*each token is polled every 6\.25 s instead/);
    assert.equal(Sink.of('caught').messages.length, 0, 'no poll timed out in a queue');
  });
});
