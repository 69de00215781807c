/**
 * A newcomer's path with only the README's words, in Chromium: a fresh Node-RED
 * user dir without this package; the packed tarball installed through the
 * palette manager (its upload button; npm fetches axios, hpagent and ioredis
 * from the registry as it would for a user); `npx charging-simulator` in that
 * user dir; example 01 imported from the package's example library; the four
 * values the simulator prints typed into the configuration dialog; Test
 * connection; Deploy; a session started, followed and stopped in the debug sidebar.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync, spawn, ChildProcess } from 'node:child_process';
import { chromium, BrowserContext, Page } from 'playwright-core';
import { delay, freePort, NODE_RED } from '../harness';

const ROOT = path.join(__dirname, '..', '..', '..');
const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => fs.existsSync(p));
const PKG = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { name: string };
const EXAMPLE = '01 Start, follow and stop a session';

type Red = {
  RED: {
    actions: { invoke(a: string, opts?: unknown): void };
    view: { importNodes(nodes: unknown[]): void };
    editor: { editConfig(name: string, type: string, id: string): void };
    nodes: { eachConfig(cb: (n: { id: string; type: string }) => void): void };
    sidebar: { show(id: string): void };
    tray: { close(): void };
  };
};

/** What the simulator prints, as the README shows it: the four values to type. */
interface Printed {
  baseUrl: string;
  tokenUrl: string;
  clientId: string;
  clientSecret: string;
}

async function readPrinted(out: () => string): Promise<Printed> {
  for (let i = 0; i < 150 && !/Client secret:/.test(out()); i++) await delay(100);
  const value = (label: string) => new RegExp(`${label}:\\s+(\\S+)`).exec(out())?.[1] ?? '';
  const printed = { baseUrl: value('Base URL'), tokenUrl: value('Token URL'), clientId: value('Client ID'), clientSecret: value('Client secret') };
  assert.ok(printed.baseUrl && printed.tokenUrl && printed.clientId && printed.clientSecret, `the simulator printed the four values:\n${out()}`);
  return printed;
}

async function installFromPalette(page: Page, tarball: string): Promise<void> {
  // Menu → Manage palette → Install; the upload button beside the search.
  await page.evaluate(() => (window as unknown as Red).RED.actions.invoke('core:manage-palette', { view: 'install' }));
  await page.setInputFiles('input[name="tarball"]', tarball);
  await page.click('.red-ui-palette-editor-upload-buttons button.primary');
  await page.waitForSelector('.red-ui-palette-node[data-palette-type="charging-start"]', { state: 'attached', timeout: 120_000 });
  // Close, as the tray's Close button does.
  await page.evaluate(() => (window as unknown as Red).RED.tray.close());
  await page.waitForSelector('#red-ui-header-shade', { state: 'hidden' });
}

async function typeConfiguration(page: Page, printed: Printed): Promise<string> {
  const id = await page.evaluate(() => {
    let found = '';
    (window as unknown as Red).RED.nodes.eachConfig((n) => {
      if (n.type === 'charging-service') found = n.id;
    });
    (window as unknown as Red).RED.editor.editConfig('', 'charging-service', found);
    return found;
  });
  await page.waitForSelector('#node-config-input-baseUrl', { state: 'visible' });
  assert.equal(await page.inputValue('#node-config-input-baseUrl'), '${CHARGING_BASE_URL}', 'the README says what to replace');
  await page.fill('#node-config-input-baseUrl', printed.baseUrl);
  await page.fill('#node-config-input-authUrl', printed.tokenUrl);
  await page.fill('#node-config-input-clientId', printed.clientId);
  await page.fill('#node-config-input-clientSecret', printed.clientSecret);
  await page.click('#node-config-charging-test');
  await page.waitForFunction(() => /Connected|failed|but/.test(document.querySelector('#node-config-charging-test-result')?.textContent ?? ''), undefined, { timeout: 20_000 });
  assert.match(String(await page.textContent('#node-config-charging-test-result')), /^Connected: token received/);
  await page.click('#node-config-dialog-ok');
  await page.waitForSelector('#node-config-input-baseUrl', { state: 'detached' });
  return id;
}

/**
 * Ends a child started in a process group of its own (npx runs the simulator
 * under npm and a shell, and passes no signal on): the group, then SIGKILL if
 * it has not exited in 5 s.
 */
async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
  const exited = new Promise((r) => child.once('exit', r));
  const signal = (sig: NodeJS.Signals) => {
    try {
      process.kill(-(child.pid as number), sig);
    } catch {
      // already gone
    }
  };
  signal('SIGTERM');
  if ((await Promise.race([exited.then(() => true), delay(5000).then(() => false)])) === false) {
    signal('SIGKILL');
    await exited;
  }
}

describe('a newcomer installs the packed package from the palette and runs example 01 (Chromium)', function () {
  this.timeout(240_000);
  const dirs: string[] = [];
  const children: ChildProcess[] = [];
  let context: BrowserContext | null = null;
  let redLog = '';
  let simOut = '';

  after(async () => {
    await context?.close();
    for (const c of children.reverse()) await stop(c);
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });

  it('palette install, npx charging-simulator, import, type the four values, Test connection, deploy: a session starts and ends', async function () {
    if (!CHROMIUM) {
      if (process.env.CHARGING_REQUIRE_BROWSER) throw new Error('Chromium is required (CHARGING_REQUIRE_BROWSER) but /usr/bin/chromium is missing');
      this.skip();
    }
    const work = fs.mkdtempSync(path.join(os.tmpdir(), 'charging-newcomer-'));
    dirs.push(work);
    // The tarball npm publishes; dist/ is already built (the suite runs from it), so no prepack build.
    const file = execFileSync('npm', ['pack', '--ignore-scripts', '--silent', '--pack-destination', work], { cwd: ROOT, encoding: 'utf8' }).trim().split('\n').pop() ?? '';
    const tarball = path.join(work, file);
    assert.ok(fs.existsSync(tarball), `npm pack wrote ${tarball}`);

    // A fresh user dir: nothing of this package in it.
    const userDir = path.join(work, 'user');
    fs.mkdirSync(userDir);
    const port = await freePort();
    fs.writeFileSync(
      path.join(userDir, 'settings.js'),
      `module.exports = { uiHost: '127.0.0.1', uiPort: ${port}, flowFile: 'flows.json', diagnostics: { enabled: false }, telemetry: { enabled: false },
  editorTheme: { tours: false, palette: { catalogues: [] } }, logging: { console: { level: 'info' } } };\n`,
    );
    const redJs = path.join(path.dirname(NODE_RED), '..', 'red.js');
    const red = spawn(process.execPath, [redJs, '--userDir', userDir, '--port', String(port)], { cwd: userDir, stdio: 'pipe', detached: true });
    children.push(red);
    red.stdout.on('data', (d: Buffer) => (redLog += d.toString()));
    red.stderr.on('data', (d: Buffer) => (redLog += d.toString()));
    for (let i = 0; i < 300 && !/Started flows|Server now running/.test(redLog); i++) await delay(100);
    assert.match(redLog, /Server now running/, redLog);

    const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'charging-chromium-'));
    dirs.push(profile);
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      viewport: { width: 1400, height: 900 },
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync', '--disable-quic'],
    });
    const page = context.pages()[0] ?? (await context.newPage());
    await page.goto(`http://127.0.0.1:${port}/`);
    await page.waitForSelector('#red-ui-palette-container', { timeout: 60_000 });
    assert.equal(await page.$('.red-ui-palette-node[data-palette-type="charging-start"]'), null, 'a fresh user dir has no charging nodes');

    await installFromPalette(page, tarball);
    assert.ok(fs.existsSync(path.join(userDir, 'node_modules', ...PKG.name.split('/'), 'package.json')), 'installed into the user dir');

    // "In the directory where Node-RED installed the package: npx charging-simulator" (a free port, and fast sessions).
    const simPort = await freePort();
    const sim = spawn('npx', ['--no-install', 'charging-simulator', '--port', String(simPort), '--power', '100000', '--start-delay', '500', '--stop-delay', '500'], { cwd: userDir, stdio: 'pipe', detached: true });
    children.push(sim);
    sim.stdout.on('data', (d: Buffer) => (simOut += d.toString()));
    sim.stderr.on('data', (d: Buffer) => (simOut += d.toString()));
    const printed = await readPrinted(() => simOut);

    // Import → Examples → @chargectl/node-red-charging-session → 01: the text the editor's example library serves.
    const lib = `library/examples/flows/${PKG.name}/${encodeURIComponent(EXAMPLE)}`;
    await page.evaluate(async (url) => {
      const res = await fetch(url);
      (window as unknown as Red).RED.view.importNodes(await res.json());
    }, lib);
    await typeConfiguration(page, printed);
    await page.waitForSelector('#red-ui-header-shade', { state: 'hidden' });
    await page.click('#red-ui-header-button-deploy');

    // The debug sidebar: started, events as it charges, stopped once 50 Wh are in.
    await page.evaluate(() => (window as unknown as Red).RED.sidebar.show('debug'));
    try {
      await page.waitForFunction(() => /node: stopped/.test(Array.from(document.querySelectorAll('.red-ui-debug-msg')).map((e) => e.textContent).join('\n')), undefined, { timeout: 60_000 });
    } catch (err) {
      await page.screenshot({ path: path.join(work, '..', 'charging-newcomer-failed.png') });
      throw new Error(`no "stopped" in the debug sidebar: ${(err as Error).message}\nNode-RED:\n${redLog}\nsimulator:\n${simOut}`);
    }
    const debug = (await page.$$eval('.red-ui-debug-msg', (els) => els.map((e) => e.textContent ?? ''))).join('\n');
    // Example 01's debug nodes are named for what they show: started, event (each change), stopped.
    assert.match(debug, /node: started[\s\S]*transactionId/, 'the session started');
    assert.match(debug, /node: event/, 'it was followed');
    assert.match(debug, /node: stopped/, 'and stopped');
    const state = (await (await fetch(`${printed.baseUrl.replace(/\/$/, '')}/__sim/state`)).json()) as { counters?: { starts?: number; stops?: number }; activeSessions?: number };
    assert.equal(state.counters?.starts, 1, 'one START');
    assert.ok((state.counters?.stops ?? 0) >= 1, 'a STOP');
    assert.equal(state.activeSessions, 0, 'the session has ended');
    assert.doesNotMatch(redLog, /\[error\]/, redLog);
  });
});
