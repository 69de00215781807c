/**
 * The README's pictures, from the real editor: `node dist/scripts/pictures.js`
 * (after `node scripts/build.js`) starts the simulator, a Node-RED with example
 * 12 deployed against it, and Debian's Chromium (playwright-core, as the browser
 * tests drive it), and writes
 *   docs/images/control-flow.png     charging-control in its flow, charging, with the debug sidebar
 *   docs/images/test-connection.png  the configuration dialog after Test connection
 * The configuration is typed as the README tells a newcomer: the simulator's
 * Base URL and Token URL, demo-client / demo-secret.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { chromium, Page } from 'playwright-core';
import { ChargingServiceSimulator } from '../simulator/simulator';
import { prepareUserDir, spawnNodeRed } from './start';

const ROOT = path.join(__dirname, '..', '..');
const IMAGES = path.join(ROOT, 'docs', 'images');
const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => fs.existsSync(p));
const EXAMPLE = path.join(ROOT, 'examples', '12 Charge in the cheapest hours.json');

type Red = { RED: { editor: { editConfig(name: string, type: string, id: string): void }; sidebar: { show(id: string): void }; menu: { setSelected(id: string, on: boolean): void } } };

const delay = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The simulator on 18080 (the address the README shows), or any free port when that one is taken. */
async function startSimulator(): Promise<ChargingServiceSimulator> {
  for (const port of [18080, 0]) {
    const sim = new ChargingServiceSimulator({ port, startDelayMs: 1000 });
    try {
      await sim.start();
      return sim;
    } catch (err) {
      if (port === 0) throw err;
    }
  }
  throw new Error('unreachable');
}

/** Example 12 with its configuration as a newcomer types it: literal URLs, no ${NAME}. */
function exampleFlow(sim: ChargingServiceSimulator): Array<Record<string, unknown>> {
  const flow = JSON.parse(fs.readFileSync(EXAMPLE, 'utf8')) as Array<Record<string, unknown>>;
  for (const n of flow) {
    if (n.type === 'charging-service') Object.assign(n, { baseUrl: sim.baseUrl, authUrl: sim.authUrl });
  }
  return flow;
}

async function waitForLog(log: () => string, pattern: RegExp, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!pattern.test(log())) {
    if (Date.now() > end) throw new Error(`Node-RED did not say ${pattern}:\n${log()}`);
    await delay(100);
  }
}

/** Clears editor notifications, which would cover the canvas. */
async function shot(page: Page, file: string, clip?: { x: number; y: number; width: number; height: number }): Promise<void> {
  await page.evaluate(() => document.querySelectorAll('.red-ui-notification').forEach((n) => n.remove()));
  await page.screenshot({ path: path.join(IMAGES, file), clip });
  console.log(`wrote docs/images/${file}`);
}

async function controlFlow(page: Page, flow: Array<Record<string, unknown>>): Promise<void> {
  // "on" by hand, as the flow's own comment suggests, so that the picture shows a session charging.
  const on = flow.find((n) => n.type === 'inject' && n.name === 'on');
  if (!on) throw new Error('example 12 has no "on" inject');
  await page.evaluate((id) => fetch(`inject/${id}`, { method: 'POST' }), String(on.id));
  await page.waitForFunction(() => Array.from(document.querySelectorAll('.red-ui-flow-node-status-label')).some((e) => /charging \d/.test(e.textContent ?? '')), undefined, { timeout: 30_000 });
  await page.evaluate(() => {
    const { RED } = window as unknown as Red;
    RED.menu.setSelected('menu-item-palette', false); // the flow, not the palette
    RED.sidebar.show('debug');
  });
  await delay(3000);
  await shot(page, 'control-flow.png', { x: 0, y: 0, width: 1400, height: 470 });
}

async function testConnection(page: Page, flow: Array<Record<string, unknown>>, sim: ChargingServiceSimulator): Promise<void> {
  const service = flow.find((n) => n.type === 'charging-service');
  await page.evaluate((id) => (window as unknown as Red).RED.editor.editConfig('', 'charging-service', id), String(service?.id));
  await page.waitForSelector('#node-config-input-clientId', { state: 'visible' });
  await page.fill('#node-config-input-clientId', sim.options.clientId);
  await page.fill('#node-config-input-clientSecret', sim.options.clientSecret);
  await page.click('#node-config-charging-test');
  await page.waitForFunction(() => /Connected|failed|but/.test(document.querySelector('#node-config-charging-test-result')?.textContent ?? ''), undefined, { timeout: 20_000 });
  const result = String(await page.textContent('#node-config-charging-test-result'));
  if (!/Connected/.test(result)) throw new Error(`Test connection did not connect: ${result}`);
  await delay(500);
  await shot(page, 'test-connection.png');
}

async function main(): Promise<void> {
  if (!CHROMIUM) throw new Error('Debian Chromium (/usr/bin/chromium) is needed: apt-get install chromium');
  fs.mkdirSync(IMAGES, { recursive: true });
  const sim = await startSimulator();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'charging-pictures-'));
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'charging-chromium-'));
  const port = 18800 + Math.floor(Math.random() * 100);
  const flow = exampleFlow(sim);
  prepareUserDir(dataDir, port, 'empty');
  fs.writeFileSync(path.join(dataDir, 'flows.json'), JSON.stringify(flow, null, 2));
  let log = '';
  // The deployed configuration reads its credentials from the environment, as every example does.
  const red: ChildProcess = spawnNodeRed(dataDir, port, 'pipe', undefined, { CHARGING_CLIENT_ID: sim.options.clientId, CHARGING_CLIENT_SECRET: sim.options.clientSecret });
  red.stdout?.on('data', (d: Buffer) => (log += d.toString()));
  red.stderr?.on('data', (d: Buffer) => (log += d.toString()));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1400, height: 900 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync', '--disable-quic'],
  });
  try {
    await waitForLog(() => log, /Started flows/, 30_000);
    const page = context.pages()[0] ?? (await context.newPage());
    await page.goto(`http://127.0.0.1:${port}/`);
    await page.waitForSelector('#red-ui-palette-container', { timeout: 60_000 });
    await controlFlow(page, flow);
    await testConnection(page, flow, sim);
  } finally {
    await context.close();
    red.kill('SIGINT');
    await new Promise((r) => red.once('exit', r));
    await sim.stop();
    for (const d of [dataDir, profile]) fs.rmSync(d, { recursive: true, force: true });
  }
}

if (require.main === module) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
