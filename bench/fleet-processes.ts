/**
 * Two figures of Coordinate replicas measured on real Node-RED processes
 * (`node dist/bench/fleet-processes.js [--runs 5] [--queries 40]` after
 * `node scripts/build.js`), for docs/fleet.md:
 *
 * 1. Takeover at the defaults (cycle 2 s, lease 6 s): three replicas watch 30
 *    tokens at a 1 s interval; kill -9 of the replica polling the most of
 *    them, at a random point of a cycle; for each of its tokens, the time from
 *    the kill to its next poll by another replica, as the simulator saw it.
 *    Per run the last of those (every token taken over) and the first; the
 *    victim comes back between runs.
 * 2. The latency added per progress query while Redis is away: one process,
 *    two configurations with Max requests per second 1 000 (so the fleet's
 *    budget is on every query's path), one with coordination (through a
 *    nemesis proxy) and one without; queries one at a time, alternating on
 *    and off, timed inside the flow (Date.now() in a function node before and after the
 *    query), with Redis up, black-holed (sockets open, nothing answered) and
 *    stopped.
 */
import { delay } from '../test/harness';
import { CLIENT_ID, CLIENT_SECRET, startSimulator, type FlowNode } from '../test/harness';
import { arrivals, recorder, REPLICA_HEADER, Replicas } from '../test/fleet-replicas';
import { RedisNemesis } from '../test/redis-nemesis';
import { RedisServer } from '../test/redis-server';
import type { ChargingServiceSimulator } from '../simulator/simulator';

const arg = (name: string, dflt: number) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
};
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((xs.length * p) / 100))];

async function takeover(runs: number): Promise<void> {
  const sim = await startSimulator({ startDelayMs: 0, stopDelayMs: 0, keepRequests: 500_000 });
  const redis = await RedisServer.start({ persist: false });
  const tokens = Array.from({ length: 30 }, (_, i) => `T-${i}`);
  const service = { id: 'svc', type: 'charging-service', baseUrl: sim.baseUrl, authUrl: sim.authUrl, scope: '', apiKeyHeader: REPLICA_HEADER, fleetKey: 'takeover' };
  const flow: FlowNode[] = [
    { id: 'tab', type: 'tab', label: 'takeover' },
    service,
    { id: 'watch-in', type: 'inject', z: 'tab', props: [{ p: 'payload' }, { p: 'topic', vt: 'str' }], topic: 'watch', payload: '[]', payloadType: 'json', repeat: '', once: false, x: 100, y: 100, wires: [['w']] },
    { id: 'w', type: 'charging-progress', z: 'tab', service: 'svc', mode: 'watch', interval: 1, x: 300, y: 100, wires: [[]] },
  ];
  const replicas = await Replicas.prepare(3, flow, '', { svc: { clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, coordination: redis.url } }, ['svc']);
  const results: Array<{ first: number; all: number; tokens: number }> = [];
  try {
    await replicas.startAll();
    await Promise.all([0, 1, 2].map((i) => replicas.inject(i, 'watch-in', [{ p: 'payload', v: JSON.stringify(tokens), vt: 'json' }, { p: 'topic', v: 'watch', vt: 'str' }])));
    for (let run = 0; run < runs; run++) {
      await delay(14_000 + Math.random() * 2000); // settled: leases spread over the three (a few 2 s cycles), and a random point of a cycle
      const recent = arrivals(sim, Math.max(0, sim.requests.length - 200), 'GET');
      const owner = new Map<string, number>();
      for (const a of recent) owner.set(a.token, a.replica);
      const counts = [0, 1, 2].map((i) => [...owner.values()].filter((r) => r === i).length);
      const victim = counts.indexOf(Math.max(...counts));
      const mine = tokens.filter((t) => owner.get(t) === victim);
      const from = sim.requests.length;
      const killedAt = Date.now();
      await replicas.kill(victim);
      const deadline = Date.now() + 30_000;
      const next = () => {
        const after = arrivals(sim, from, 'GET').filter((a) => a.replica !== victim && a.at >= killedAt);
        return mine.map((t) => after.find((a) => a.token === t)?.at);
      };
      while (next().some((x) => x === undefined) && Date.now() < deadline) await delay(100);
      const at = next().map((x) => (x ?? NaN) - killedAt);
      results.push({ first: Math.min(...at), all: Math.max(...at), tokens: mine.length });
      console.log(`takeover run ${run + 1}: replica ${victim} held ${mine.length} tokens; first taken over after ${Math.min(...at)} ms, all after ${Math.max(...at)} ms`);
      await replicas.start(victim);
    }
  } finally {
    await replicas.remove();
    await redis.close();
    await sim.stop();
  }
  const all = results.map((r) => r.all);
  console.log(`takeover at defaults (cycle 2 s, lease 6 s, interval 1 s): all of the victim's tokens polled by another replica after median ${median(all)} ms, range ${Math.min(...all)}-${Math.max(...all)} ms; first ${median(results.map((r) => r.first))} ms median (${runs} runs)`);
}

function latencyFlow(sim: ChargingServiceSimulator): FlowNode[] {
  const stamp = { type: 'function', z: 'tab', func: 'msg.t0 = Date.now();\nreturn msg;', outputs: 1, libs: [] };
  const time = (id: string, y: number): FlowNode => ({
    id,
    type: 'function',
    z: 'tab',
    name: id,
    func: "node.log('OUT ' + JSON.stringify({ n: node.name, at: Date.now(), statusCode: msg.statusCode, ms: Date.now() - msg.t0 }));\nreturn null;",
    outputs: 1,
    x: 700,
    y,
    wires: [[]],
  });
  const service = { type: 'charging-service', baseUrl: sim.baseUrl, authUrl: sim.authUrl, scope: '', maxRequestsPerSec: 1000, timeout: 10 };
  return [
    { id: 'tab', type: 'tab', label: 'latency' },
    { id: 'svcOn', name: 'on', fleetKey: 'latency', ...service },
    { id: 'svcOff', name: 'off', ...service },
    { id: 'in-on', type: 'inject', z: 'tab', props: [{ p: 'payload' }], payload: '{"token":"L-1"}', payloadType: 'json', repeat: '', once: false, x: 100, y: 100, wires: [['t-on']] },
    { id: 't-on', ...stamp, x: 250, y: 100, wires: [['q-on']] },
    { id: 'q-on', type: 'charging-progress', z: 'tab', service: 'svcOn', x: 400, y: 100, wires: [['lat-on']] },
    time('lat-on', 100),
    { id: 'in-off', type: 'inject', z: 'tab', props: [{ p: 'payload' }], payload: '{"token":"L-1"}', payloadType: 'json', repeat: '', once: false, x: 100, y: 200, wires: [['t-off']] },
    { id: 't-off', ...stamp, x: 250, y: 200, wires: [['q-off']] },
    { id: 'q-off', type: 'charging-progress', z: 'tab', service: 'svcOff', x: 400, y: 200, wires: [['lat-off']] },
    time('lat-off', 200),
    { id: 'catch', type: 'catch', z: 'tab', scope: null, uncaught: false, x: 100, y: 300, wires: [['recE']] },
    recorder('recE', 700, 300),
  ];
}

async function latency(queries: number): Promise<void> {
  const sim = await startSimulator({ startDelayMs: 0, stopDelayMs: 0, keepRequests: 100_000 });
  const redis = await RedisServer.start({ persist: false });
  const nemesis = await RedisNemesis.start(redis.port);
  const creds = { clientId: CLIENT_ID, clientSecret: CLIENT_SECRET };
  const one = await Replicas.prepare(1, latencyFlow(sim), '', { svcOn: { ...creds, coordination: nemesis.urlFor(redis.url) }, svcOff: creds }, []);
  const rows: string[] = [];
  try {
    await one.startAll();
    const measure = async (state: string) => {
      const took = { on: [] as number[], off: [] as number[] };
      for (let k = 0; k < queries; k++) {
        for (const side of k % 2 ? (['off', 'on'] as const) : (['on', 'off'] as const)) {
          const before = one.outputs(`lat-${side}`).length + one.outputs('recE').length;
          await one.inject(0, `in-${side}`);
          const end = Date.now() + 15_000;
          while (one.outputs(`lat-${side}`).length + one.outputs('recE').length <= before && Date.now() < end) await delay(2);
          const last = one.outputs(`lat-${side}`).at(-1);
          const ms = (last as { ms?: number } | undefined)?.ms;
          if (ms !== undefined && one.outputs(`lat-${side}`).length + one.outputs('recE').length > before) took[side].push(ms);
        }
      }
      const f = (xs: number[]) => `median ${median(xs).toFixed(1)} ms, p90 ${pct(xs, 90).toFixed(1)} ms, max ${Math.max(...xs).toFixed(0)} ms (${xs.length})`;
      rows.push(`${state}: on ${f(took.on)}; off ${f(took.off)}; added ${(median(took.on) - median(took.off)).toFixed(1)} ms`);
      console.log(rows.at(-1));
    };
    for (let k = 0; k < 4; k++) {
      await one.inject(0, 'in-on'); // warm: token, sockets, the fleet's connection
      await one.inject(0, 'in-off');
    }
    await delay(1000);
    await measure('Redis up');
    nemesis.blackhole();
    await delay(500);
    await measure('Redis black-holed, first queries (the socket not yet known dead)');
    await measure('Redis black-holed, known down');
    nemesis.heal();
    await delay(3000);
    await redis.stop();
    await delay(500);
    await measure('Redis stopped');
    await redis.start();
    await delay(4000);
    await measure('Redis back');
    console.log(`errors at Catch: ${one.outputs('recE').length}`);
  } finally {
    await one.remove();
    await nemesis.close();
    await redis.close();
    await sim.stop();
  }
}

async function main(): Promise<void> {
  if (!process.argv.includes('--no-latency')) await latency(arg('--queries', 40));
  if (!process.argv.includes('--no-takeover')) await takeover(arg('--runs', 5));
  process.exit(0);
}

void main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
