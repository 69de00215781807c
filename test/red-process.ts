/**
 * A real Node-RED process (`node red.js`, the Node-RED under test) on a user
 * dir prepared as npm start prepares one, for the tests where a restart, a
 * kill -9 or the runtime language must be real.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { prepareUserDir, spawnNodeRed } from '../scripts/start';
import { CLIENT_ID, CLIENT_SECRET, freePort, NODE_RED, until } from './harness';

export class RedProcess {
  /** what the running (or last) process printed */
  log = '';
  /** environment variables of the next start (e.g. HTTP_PROXY) */
  env: Record<string, string> = {};
  private child: ChildProcess | null = null;

  private constructor(
    readonly dataDir: string,
    /** its HTTP port: chosen free when prepared, and again when another process took it before a start */
    public port: number,
  ) {}

  /**
   * A fresh user dir with the flow, the credentials of the config node `svc`,
   * and `settings` appended to the demo's settings.js (e.g. a contextStorage).
   * `credentials`: more credentials by node id; those of `svc` are added to its
   * client ID and secret (e.g. `coordination`).
   */
  static async prepare(prefix: string, flow: unknown[], settings = '', credentials: Record<string, Record<string, unknown>> = {}): Promise<RedProcess> {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
    const port = await freePort();
    prepareUserDir(dataDir, port, 'empty');
    const file = path.join(dataDir, 'settings.js');
    if (settings) fs.writeFileSync(file, fs.readFileSync(file, 'utf8').replace(/};\s*$/, `${settings}\n};\n`));
    fs.writeFileSync(path.join(dataDir, 'flows.json'), JSON.stringify(flow));
    const svc = { clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, ...credentials.svc };
    fs.writeFileSync(path.join(dataDir, 'flows_cred.json'), JSON.stringify({ ...credentials, svc }));
    return new RedProcess(dataDir, port);
  }

  /** The running process's id (null when it is not running). */
  get pid(): number | null {
    return this.running ? (this.child?.pid ?? null) : null;
  }

  /** Whether the process was started and has not exited. */
  get running(): boolean {
    return this.child !== null && this.child.exitCode === null && this.child.signalCode === null;
  }

  /**
   * Starts Node-RED and waits until its flows run. The port was free when it
   * was chosen; a process started since (a simulator, a Redis, another
   * replica) may hold it: then another free one, up to three times.
   */
  async start(): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      this.log = '';
      const child = spawnNodeRed(this.dataDir, this.port, 'pipe', path.join(path.dirname(NODE_RED), '..', 'red.js'), this.env);
      this.child = child;
      child.stdout?.on('data', (d: Buffer) => (this.log += d.toString()));
      child.stderr?.on('data', (d: Buffer) => (this.log += d.toString()));
      await until(() => /Started flows/.test(this.log) || /port in use/.test(this.log) || child.exitCode !== null, 'Node-RED to start', 30_000);
      if (!/Started flows/.test(this.log) && /port in use/.test(this.log) && attempt < 3) {
        await this.stop();
        this.port = await freePort();
        continue;
      }
      assert.match(this.log, /Started flows/, `Node-RED did not start:\n${this.log}`);
      return;
    }
  }

  /** Stops it (SIGINT: a clean stop; SIGKILL: kill -9) and waits for the exit. */
  async stop(signal: NodeJS.Signals = 'SIGINT'): Promise<void> {
    const child = this.child;
    if (child && child.exitCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill(signal);
      await exited;
    }
    this.child = null;
  }

  /** Stops it and removes the user dir. */
  async remove(): Promise<void> {
    await this.stop();
    fs.rmSync(this.dataDir, { recursive: true, force: true });
  }

  /** How many times the log matches. */
  count(re: RegExp): number {
    return (this.log.match(re) ?? []).length;
  }
}
