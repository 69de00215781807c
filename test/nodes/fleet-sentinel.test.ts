/**
 * Three real Node-RED replicas on Redis Sentinel (a primary, a replica and
 * three sentinels, each a real redis-server process: test/redis-sentinel.ts),
 * configured with a redis-sentinel:// URL, under load: 10 watched tokens, the
 * driver beginning and ending sessions, START and STOP injected on every
 * replica at once. SENTINEL FAILOVER, then kill -9 of the primary (restarted
 * as a replica, as a service manager would). The nemesis's invariants hold
 * with no allowance for either (test/fleet-process-invariants.ts): each
 * session's started and ended exactly once, each injected command at the
 * service exactly once, none that nobody injected, every token polled within
 * its bound of the promotion, the budget kept, no secret in any log.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { runProcessChaos } from '../fleet-process-chaos';
import { requireRedis } from '../redis-server';
import { delay, freePort, until } from '../harness';
import { parseRedisUrl, type SentinelTarget } from '../../nodes/lib/fleet/redis/url';

describe('fleet: three Node-RED processes on Redis Sentinel, failed over under load', function () {
  this.timeout(150_000);
  before(function () {
    requireRedis(this);
  });

  it('SENTINEL FAILOVER and kill -9 of the primary: every command once, every started/ended once, every token polled again within its bound', async () => {
    const report = await runProcessChaos({ seed: 4, seconds: 0, redis: 'sentinel', faults: ['failover', 'primary-kill'] });
    assert.equal(report.figures.failovers, 2, `both failovers happened:\n${report.schedule.join('\n')}`);
    assert.ok(report.figures.commands > 0, 'commands were injected');
    assert.ok(report.figures.sessions > 0, 'the driver began sessions');
    assert.equal(report.figures.commandsTwiceAfterDataLossOrGoneSender, 0);
    assert.equal(report.figures.eventsRepeatedAfterDataLoss, 0);
    console.log(`      every token polled again ${report.figures.repolledAfterPromotionMs} ms after the promotion at worst; ${report.figures.writesTheDemotedPrimaryAcknowledged} durable writes acknowledged by a primary being replaced, none taken as done`);
    assert.deepEqual(report.violations, [], `schedule:\n${report.schedule.join('\n')}`);
  });
});

describe('npm start -- --replicas 2 --sentinel', function () {
  this.timeout(120_000);

  it('starts a primary, a replica and three sentinels, and two Node-RED replicas joined on the primary the sentinels name; Ctrl-C stops all', async function () {
    requireRedis(this);
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'charging-start-sentinel-'));
    const port = await freePort();
    const env: NodeJS.ProcessEnv = { ...process.env, PORT: String(port), SIM_PORT: String(await freePort()), CHARGING_DATA_DIR: dataDir };
    delete env.CHARGING_COORDINATION;
    const child = spawn(process.execPath, [path.join(__dirname, '..', '..', 'scripts', 'start.js'), '--replicas', '2', '--sentinel'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const ports: number[] = [];
    const clients: Redis[] = [];
    try {
      await until(() => (out.match(/^\[replica-\d\] .*Started flows/gm) ?? []).length === 2 || child.exitCode !== null, 'both replicas to start', 60_000);
      assert.equal(child.exitCode, null, out);
      const url = /^Redis: +(redis-sentinel:\/\/\S+)/m.exec(out)?.[1];
      assert.ok(url, out);
      const target = parseRedisUrl(url) as SentinelTarget;
      assert.equal(target.sentinels.length, 3);
      const sentinel = new Redis({ host: '127.0.0.1', port: target.sentinels[0].port, maxRetriesPerRequest: 1 });
      clients.push(sentinel);
      const [, primaryPort] = (await sentinel.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', target.name)) as [string, string];
      const replicaPort = Number(/replica 127\.0\.0\.1:(\d+)/.exec(out)?.[1]);
      ports.push(...target.sentinels.map((s) => s.port), Number(primaryPort), replicaPort);
      const primary = new Redis({ host: '127.0.0.1', port: Number(primaryPort), maxRetriesPerRequest: 1 });
      clients.push(primary);
      const members = async () => {
        const pids = new Set<number>();
        for (const k of await primary.keys('chargectl:*:replicas:info')) for (const v of Object.values(await primary.hgetall(k))) pids.add((JSON.parse(v) as { pid: number }).pid);
        return pids.size;
      };
      let seen = 0;
      const end = Date.now() + 30_000;
      while ((seen = await members()) < 2 && Date.now() < end) await delay(200);
      assert.equal(seen, 2, `two replica processes in the fleet, on the primary the sentinels name:\n${out.slice(-3000)}`);
      assert.match(out, /SENTINEL FAILOVER chargedemo/, 'says how to fail it over');
      assert.doesNotMatch(out, /Unhandled|uncaughtException|\[error\]/);
    } finally {
      for (const c of clients) c.disconnect();
      const exited = new Promise<number | null>((r) => (child.exitCode !== null ? r(child.exitCode) : child.once('exit', (code) => r(code))));
      child.kill('SIGINT');
      const code = await exited;
      fs.rmSync(dataDir, { recursive: true, force: true });
      assert.equal(code, 0, out.slice(-3000));
    }
    for (const p of ports) {
      const gone = await new Promise<boolean>((resolve) => {
        const s = net.connect(p, '127.0.0.1', () => {
          s.destroy();
          resolve(false);
        });
        s.on('error', () => resolve(true));
      });
      assert.ok(gone, `redis-server on ${p} stopped`);
    }
  });
});
