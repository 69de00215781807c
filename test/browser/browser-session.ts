/**
 * A real Node-RED (started the way `npm start` starts it: linked package, demo
 * settings, the simulator's address and credentials in its environment) and
 * Debian's Chromium on its editor, for the browser suites. Without Chromium the
 * suite is skipped, unless CHARGING_REQUIRE_BROWSER is set (.ci/run sets it and
 * installs Chromium). Screenshots go to screenshots/ (git-ignored).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { chromium, BrowserContext, Page } from 'playwright-core';
import type { ChargingServiceSimulator } from '../../simulator/simulator';
import type { SimulatorOptions } from '../../simulator/simulator';
import { prepareUserDir, simulatorEnv, spawnNodeRed } from '../../scripts/start';
import { startSimulator, delay, freePort, NODE_RED } from '../harness';

const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => fs.existsSync(p));
const SHOTS = path.join(__dirname, '..', '..', '..', 'screenshots', process.env.CHARGING_NODE_RED ? 'node-red-5' : 'node-red-4');

export interface BrowserSession {
  sim: ChargingServiceSimulator;
  page: Page;
  /** Node-RED's editor, http://127.0.0.1:port/ */
  url: string;
  /** Node-RED's output so far */
  log(): string;
  shot(name: string): Promise<void>;
}

/**
 * Registers before/after hooks on the current suite; the session is filled in by `before`.
 * `prepare` may change the user dir (settings, flows) before Node-RED starts on it.
 */
export function browserSession(flows: 'empty' | 'reset', simOptions: SimulatorOptions = {}, prepare?: (dataDir: string) => void): BrowserSession {
  let red: ChildProcess | null = null;
  let context: BrowserContext | null = null;
  let redLog = '';
  const dirs: string[] = [];
  const session = {
    log: () => redLog,
    shot: async (name: string) => {
      // Editor notifications ("Imported", "Deployed") would cover the canvas in the picture.
      await session.page.evaluate(() => document.querySelectorAll('.red-ui-notification').forEach((n) => n.remove()));
      await session.page.screenshot({ path: path.join(SHOTS, `${name}.png`) });
    },
  } as BrowserSession;

  before(async function () {
    if (!CHROMIUM) {
      if (process.env.CHARGING_REQUIRE_BROWSER) throw new Error('Chromium is required (CHARGING_REQUIRE_BROWSER) but /usr/bin/chromium is missing');
      this.skip();
    }
    fs.mkdirSync(SHOTS, { recursive: true });
    session.sim = await startSimulator(simOptions);
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'charging-editor-'));
    const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'charging-chromium-'));
    dirs.push(dataDir, profile);
    const port = await freePort();
    prepareUserDir(dataDir, port, flows);
    prepare?.(dataDir);
    // The Node-RED under test (4.x, or 5.x on the second pass), run with this process's Node.
    red = spawnNodeRed(dataDir, port, 'pipe', path.join(path.dirname(NODE_RED), '..', 'red.js'), simulatorEnv(session.sim));
    red.stdout?.on('data', (d: Buffer) => (redLog += d.toString()));
    red.stderr?.on('data', (d: Buffer) => (redLog += d.toString()));
    for (let i = 0; i < 200 && !/Started flows/.test(redLog); i++) await delay(100);
    assert.match(redLog, /Started flows/, `Node-RED did not start:\n${redLog}`);
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      viewport: { width: 1400, height: 900 },
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync', '--disable-quic'],
    });
    session.page = context.pages()[0] ?? (await context.newPage());
    session.url = `http://127.0.0.1:${port}/`;
    await session.page.goto(session.url);
    await session.page.waitForSelector('#red-ui-palette-container', { timeout: 60_000 });
  });

  after(async () => {
    await context?.close();
    if (red) {
      red.kill('SIGINT');
      await new Promise((r) => red?.once('exit', r));
    }
    await session.sim?.stop();
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });

  return session;
}
