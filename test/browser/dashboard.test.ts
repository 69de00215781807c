/**
 * Example 11, the Dashboard 2.0 page, in a real browser: deployed by npm start's
 * user dir (Dashboard 2.0 linked in, the demo's DASH- token), on both passes
 * (Node-RED 4 and 5). Only the poll interval is shortened (settings
 * chargingSession.minPollIntervalSec), and only the dashboard's part of the demo
 * runs, so that every START and STOP the simulator sees is the page's.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { delay } from '../harness';
import { browserSession } from './browser-session';

const TOKEN = 'DASH-RFID-1';

/** The demo's dashboard nodes (and Dashboard 2.0's shared site, theme and page) polling every second. */
function quickDashboardOnly(dataDir: string): void {
  const settings = path.join(dataDir, 'settings.js');
  fs.writeFileSync(settings, fs.readFileSync(settings, 'utf8').replace('module.exports = {', 'module.exports = {\n    chargingSession: { minPollIntervalSec: 1 },'));
  const flowFile = path.join(dataDir, 'flows.json');
  const flow = (JSON.parse(fs.readFileSync(flowFile, 'utf8')) as Array<Record<string, unknown>>).filter((n) => /^(demo-)?e11-/.test(n.id as string));
  for (const n of flow) if (n.type === 'charging-progress' && n.mode === 'watch') n.interval = 1;
  for (const n of flow) if (n.type === 'inject' && n.once) n.onceDelay = 0.5;
  // A short guard, so that the switch can charge again soon after Stop now.
  for (const n of flow) if (n.type === 'charging-control') Object.assign(n, { guard: 2, checkInterval: 1 });
  fs.writeFileSync(flowFile, JSON.stringify(flow, null, 2));
}

/** Whether the Charge switch is on, as the page shows it. */
const switchedOn = (page: Page) => page.$eval('.charging-switch input[type="checkbox"]', (e) => (e as HTMLInputElement).checked);

/** What a widget shows (the page's own text, as the user reads it). */
const shown = (page: Page, cls: string) => page.$eval(`.${cls} .nrdb-ui-text-value`, (e) => e.textContent?.trim() ?? '');

async function until(page: Page, cls: string, wanted: RegExp, ms = 20_000): Promise<string> {
  const deadline = Date.now() + ms;
  let last = '';
  while (Date.now() < deadline) {
    last = await shown(page, cls).catch(() => '');
    if (wanted.test(last)) return last;
    await delay(200);
  }
  assert.fail(`${cls} shows "${last}", not ${wanted}`);
}

describe('Dashboard 2.0 page of example 11 (Chromium)', function () {
  this.timeout(120_000);
  const session = browserSession('reset', { startDelayMs: 300, stopDelayMs: 300 }, quickDashboardOnly);
  let page: Page;
  before(async () => {
    page = session.page;
    await page.goto(new URL('dashboard', session.url).href);
    await page.waitForSelector('.charging-state', { timeout: 60_000 });
  });

  it('shows the session the demo started charging, its energy rising between two looks', async () => {
    await until(page, 'charging-state', /^charging$/);
    const first = parseFloat(await until(page, 'charging-energy', /kWh$/));
    const deadline = Date.now() + 20_000;
    let later = first;
    while (Date.now() < deadline && later <= first) {
      await delay(500);
      later = parseFloat(await shown(page, 'charging-energy'));
    }
    assert.ok(later > first, `energy ${first} kWh, then ${later} kWh`);
    assert.match(await shown(page, 'charging-duration'), /^\d+:\d\d:\d\d$/);
    const gauge = await page.$eval('.charging-power .nrdb-ui-gauge-value', (e) => e.textContent ?? ''); // the value and "kW"
    const kW = parseFloat(gauge);
    // 11 kW in the simulator; the meter counts whole Wh, so one second's reading is a little off.
    assert.ok(kW > 9 && kW < 13, `the gauge shows the simulator's 11 kW: ${gauge}`);
    assert.match(gauge, /kW/);
    assert.equal(await page.$$eval('.charging-chart canvas', (c) => c.length), 1, 'the power chart is drawn');
    await until(page, 'charging-control', /^on → charging \(transaction TX-/);
    assert.equal(await switchedOn(page), true, 'the Charge switch shows the wish the control node holds');
    // The picture in the README: a few more points on the chart, the whole card in view.
    await delay(1500);
    await page.setViewportSize({ width: 700, height: 960 });
    await delay(500);
    await session.shot('dashboard');
    await page.setViewportSize({ width: 1400, height: 900 });
  });

  it('Stop asks first; confirmed, exactly one STOP reaches the service (at once, guard or not), the state becomes ended, the switch goes off', async () => {
    const tx = session.sim.session(TOKEN)?.transactionId;
    assert.ok(tx, 'the demo session charges');
    await page.click('.charging-stop');
    await page.waitForSelector('.charging-stop-confirm', { state: 'visible' });
    await delay(500);
    assert.equal(session.sim.counters.stopArrivals, 0, 'no STOP before the confirmation');
    await page.click('.charging-stop-confirm');
    await until(page, 'charging-state', /^ended$/);
    assert.equal(session.sim.arrivals('STOP', tx), 1);
    assert.equal(session.sim.counters.stopArrivals, 1);
    await until(page, 'charging-control', /^off → no session$/);
    assert.equal(await switchedOn(page), false);
  });

  it('the Charge switch, wired straight to charging-control, charges the connector again with a new transaction', async () => {
    await page.click('.charging-switch input[type="checkbox"]');
    await until(page, 'charging-state', /^charging$/);
    await until(page, 'charging-control', /^on → charging \(transaction TX-/);
    const s = session.sim.session(TOKEN);
    assert.ok(s && s.stoppedAt === null, 'a live session');
    assert.equal(session.sim.counters.startArrivals, 2, 'the wish after deploy, then the switch');
    assert.equal(await switchedOn(page), true);
    assert.doesNotMatch(session.log(), /\[error\]/);
    assert.equal(await shown(page, 'charging-error'), 'none', 'no error on the page');
  });
});
