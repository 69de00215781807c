/**
 * The demo fleet's Redis for `npm start -- --replicas N [--sentinel]`:
 * Debian's redis-server on loopback, one data node, or a primary, a replica
 * and three sentinels; each stopped with npm start.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

/** A running demo Redis: the URL the replicas get, its processes, and a line for the console. */
export interface DemoRedis {
  url: string;
  procs: ChildProcess[];
  about: string;
}

/** Debian's redis-server (or one on the PATH), or null. */
export function redisServerPath(): string | null {
  const dirs = [...(process.env.PATH ?? '').split(path.delimiter), '/usr/bin', '/usr/sbin', '/usr/local/bin'].filter(Boolean);
  for (const d of dirs) {
    const file = path.join(d, 'redis-server');
    try {
      fs.accessSync(file, fs.constants.X_OK);
      return file;
    } catch {
      // not here
    }
  }
  return null;
}

/** A redis-server process (a data node or, with --sentinel in `args`, a sentinel), once it says `ready`. */
async function startRedisProcess(bin: string, args: string[], ready: RegExp): Promise<ChildProcess> {
  const proc = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`redis-server did not start within 10 s:\n${log.slice(-1000)}`)), 10_000);
    proc.stdout?.on('data', (d: Buffer) => {
      log += d.toString();
      if (ready.test(log)) {
        clearTimeout(timer);
        resolve();
      }
    });
    proc.stderr?.on('data', (d: Buffer) => (log += d.toString()));
    proc.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`redis-server exited (${code}):\n${log.slice(-1000)}`));
    });
  });
  proc.removeAllListeners('exit');
  proc.stdout?.removeAllListeners('data');
  proc.stdout?.resume();
  proc.stderr?.resume();
  return proc;
}

const DATA_NODE = ['--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no', '--logfile', '', '--protected-mode', 'no'];

/**
 * A private Redis for the demo fleet: loopback only, a free port, no
 * persistence (the fleet's state is short-lived), stopped with npm start.
 */
export async function startRedis(bin: string): Promise<DemoRedis> {
  const port = await freeLoopbackPort();
  const proc = await startRedisProcess(bin, [...DATA_NODE, '--port', String(port), '--dir', os.tmpdir()], /Ready to accept connections/);
  return { url: `redis://127.0.0.1:${port}`, procs: [proc], about: `redis-server pid ${proc.pid}, no persistence, stopped with npm start` };
}

/** The Sentinel primary name of the demo. */
export const DEMO_PRIMARY = 'chargedemo';

/**
 * `--sentinel`: a primary, a replica and three sentinels, each a redis-server
 * process on loopback (the sentinels as `redis-server <conf> --sentinel`,
 * with quick timings: a primary is judged down after 2 s), in a temporary
 * directory; the replicas get the redis-sentinel:// URL.
 */
export async function startSentinel(bin: string): Promise<DemoRedis> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'charging-demo-sentinel-'));
  const [primaryPort, replicaPort] = [await freeLoopbackPort(), await freeLoopbackPort()];
  const procs: ChildProcess[] = [];
  const node = (port: number, extra: string[]) => startRedisProcess(bin, [...DATA_NODE, '--port', String(port), '--dir', dir, '--dbfilename', `dump-${port}.rdb`, '--repl-diskless-sync-delay', '0', ...extra], /Ready to accept connections/);
  procs.push(await node(primaryPort, []));
  procs.push(await node(replicaPort, ['--replicaof', '127.0.0.1', String(primaryPort)]));
  const sentinelPorts: number[] = [];
  for (let i = 0; i < 3; i++) {
    const port = await freeLoopbackPort();
    const conf = path.join(dir, `sentinel-${port}.conf`);
    const lines = [`port ${port}`, 'bind 127.0.0.1', `dir ${dir}`, 'protected-mode no', 'daemonize no', 'logfile ""', `sentinel monitor ${DEMO_PRIMARY} 127.0.0.1 ${primaryPort} 2`, `sentinel down-after-milliseconds ${DEMO_PRIMARY} 2000`, `sentinel failover-timeout ${DEMO_PRIMARY} 10000`];
    fs.writeFileSync(conf, `${lines.join('\n')}\n`);
    procs.push(await startRedisProcess(bin, [conf, '--sentinel'], /\+monitor master/));
    sentinelPorts.push(port);
  }
  const url = `redis-sentinel://${sentinelPorts.map((p) => `127.0.0.1:${p}`).join(',')}/${DEMO_PRIMARY}`;
  const about = `primary 127.0.0.1:${primaryPort} (pid ${procs[0].pid}), replica 127.0.0.1:${replicaPort}, sentinels ${sentinelPorts.join(', ')}; stopped with npm start.
           Fail it over and watch the replicas follow: redis-cli -p ${sentinelPorts[0]} SENTINEL FAILOVER ${DEMO_PRIMARY}
           or kill the primary: kill -9 ${procs[0].pid}`;
  return { url, procs, about };
}

async function freeLoopbackPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}
