/**
 * A newcomer's path, in a real browser: `npm start`'s editor (demo deployed,
 * the simulator in Node-RED's environment), then every example imported from
 * the editor's example library as a user imports it: no "nodes already exist"
 * question, nothing to type, and after a full deploy no red status anywhere.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { delay } from '../harness';
import { browserSession } from './browser-session';

const EXAMPLES = fs
  .readdirSync(path.join(__dirname, '..', '..', '..', 'examples'))
  .filter((f) => f.endsWith('.json'))
  .sort();

/** Whether example 12's scheduler wants its connector on at this hour: its 4 cheapest hours of the prices it ships with. */
function example12WantsOn(): boolean {
  const flow = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', '..', 'examples', '12 Charge in the cheapest hours.json'), 'utf8')) as Array<Record<string, unknown>>;
  const prices = (JSON.parse(String(flow.find((n) => n.id === 'e12-i-prices')?.payload)) as { prices: number[] }).prices;
  const cheapest = prices.map((price, hour) => ({ price, hour })).sort((a, b) => a.price - b.price || a.hour - b.hour).slice(0, 4).map((x) => x.hour);
  return cheapest.includes(new Date().getHours());
}

interface EditorNode {
  id: string;
  type: string;
  status?: { fill?: string; text?: string };
  valid?: boolean;
}

/** Every node the editor knows, with the status it last received from the runtime (whatever tab it is on). */
async function editorNodes(page: Page): Promise<EditorNode[]> {
  return page.evaluate(() => {
    type Each = (cb: (n: Record<string, unknown>) => void) => void;
    const RED = (window as unknown as { RED: { nodes: { eachNode: Each; eachConfig: Each; eachWorkspace: Each } } }).RED;
    const out: Array<Record<string, unknown>> = [];
    const add = (n: Record<string, unknown>) => out.push({ id: n.id, type: n.type, status: n.status, valid: n.valid });
    RED.nodes.eachNode(add);
    RED.nodes.eachConfig(add);
    RED.nodes.eachWorkspace(add);
    return out as unknown as EditorNode[];
  });
}

describe("examples imported into npm start's editor (Chromium)", function () {
  this.timeout(180_000);
  // The simulator as npm start runs it, but quicker sessions so that the stories end within the test.
  const session = browserSession('reset', { startDelayMs: 500, stopDelayMs: 500, powerW: 100_000 });

  it('the demo runs with nothing typed: tells its story (start, stop, both demos), then no red status', async () => {
    const { page, sim } = session;
    await page.waitForFunction(() => Array.from(document.querySelectorAll('.red-ui-flow-node-status-label')).some((e) => /started|charging|watching/.test(e.textContent ?? '')), undefined, { timeout: 30_000 });
    const deadline = Date.now() + 40_000;
    // DASH-RFID-1 (the dashboard, example 11) charges on until someone presses Stop on the page.
    while (Date.now() < deadline && !(sim.counters.stops >= 2 && sim.activeSessions() === 1)) await delay(500);
    assert.equal(sim.counters.starts, 3, 'DEMO-RFID-1, MON-RFID-1 and DASH-RFID-1 started once each');
    assert.ok(sim.session('DASH-RFID-1'), 'the dashboard session charges on');
    assert.equal(sim.counters.stops, 2, 'and stopped once each');
    const red = (await editorNodes(page)).filter((n) => n.status?.fill === 'red');
    assert.deepEqual(red, []);
    // The pictures in the README and docs: each demo tab with the debug sidebar open.
    await page.setViewportSize({ width: 1680, height: 900 }); // a common screen: the whole flow in view
    await page.evaluate(() => (window as unknown as { RED: { sidebar: { show(id: string): void } } }).RED.sidebar.show('debug'));
    await delay(300);
    await session.shot('demo-running');
    await page.evaluate(() => (window as unknown as { RED: { workspaces: { show(id: string): void } } }).RED.workspaces.show('demo-e05-tab'));
    await delay(300);
    await session.shot('demo-monitor');
    await page.setViewportSize({ width: 1400, height: 900 });
  });

  for (const file of EXAMPLES) {
    it(`${file}: imports from the example library without a conflict question, and every node is valid`, async () => {
      const { page } = session;
      const lib = `library/examples/flows/@chargectl/node-red-charging-session/${encodeURIComponent(file.replace(/\.json$/, ''))}`;
      // The text the editor's Import > Examples shows for the file, as Node-RED serves it.
      const fetched = await page.evaluate(async (url) => {
        const res = await fetch(url);
        return { status: res.status, text: await res.text() };
      }, lib);
      assert.equal(fetched.status, 200, `GET ${lib}`);
      // Dashboard 2.0's editor keeps one ui-base per Node-RED: the demo's stays, an imported one is dropped.
      const imported = { ids: (JSON.parse(fetched.text) as Array<{ id: string; type: string }>).filter((n) => n.type !== 'ui-base').map((n) => n.id) };
      // Import it as a user does: the Import dialog, the flow text, the Import button.
      await page.evaluate(() => document.querySelectorAll('.red-ui-notification').forEach((n) => n.remove()));
      await page.evaluate(() => (window as unknown as { RED: { clipboard: { import(): void } } }).RED.clipboard.import());
      await page.waitForSelector('#red-ui-clipboard-dialog-import-text', { state: 'visible' });
      await page.fill('#red-ui-clipboard-dialog-import-text', fetched.text);
      await page.dispatchEvent('#red-ui-clipboard-dialog-import-text', 'keyup'); // the dialog checks the text on keyup, then enables Import
      await page.click('#red-ui-clipboard-dialog-ok');
      await page.waitForSelector('#red-ui-clipboard-dialog-import-text', { state: 'hidden' });
      // An import lands as a "ghost" under the mouse until placed: place it.
      await page.mouse.move(700, 500);
      await page.mouse.click(700, 500);
      await delay(300);
      const notes = await page.$$eval('.red-ui-notification', (els) => els.map((e) => e.textContent ?? ''));
      assert.ok(!notes.some((t) => /already exist/.test(t)), `conflict question: ${notes.join(' | ')}`);
      const nodes = await editorNodes(page);
      const ours = nodes.filter((n) => imported.ids.includes(n.id));
      assert.deepEqual(ours.map((n) => n.id).sort(), [...imported.ids].sort(), 'the flow was imported with its own ids');
      const invalid = ours.filter((n) => n.valid === false);
      assert.deepEqual(invalid, [], 'nothing to fix before deploy');
    });
  }

  it('a full deploy of the demo and all examples: no warning dialog, and after the stories ran no red status anywhere', async () => {
    const { page, sim } = session;
    const stops0 = sim.counters.stops;
    await page.click('#red-ui-header-button-deploy');
    await delay(1000);
    // A deploy that finds problems asks before it goes ahead; there must be nothing to ask about.
    const asked = await page.evaluate(() => {
      const $ = (window as unknown as { $: (s: string) => { text(): string } }).$;
      return `${$('.ui-dialog:visible').text()} | ${$('.red-ui-notification:visible').text()}`;
    });
    assert.doesNotMatch(asked, /not properly configured|invalid|unknown|property value missing/i);
    await page.waitForFunction(() => document.querySelector('#red-ui-header-button-deploy')?.classList.contains('disabled'), undefined, { timeout: 15_000 });
    // The once-injects of 01 (copy and demo) and 05 fire within 4 s; the stories end within ~20 s.
    const deadline = Date.now() + 40_000;
    // Example 11 and the demo's dashboard charge on (DASH-RFID-1, E11-RFID-1): their Stop is a button. Example 12
    // charges E12-RFID-1 when the hour now is one of its cheapest (its prices are sent 2 s after the deploy). Example 13
    // wants six connectors on and its depot lets two charge (its turns come after 30 minutes).
    const e12 = example12WantsOn();
    const charging = 2 + 2 + (e12 ? 1 : 0);
    while (Date.now() < deadline && !(sim.counters.stops - stops0 >= 4 && sim.activeSessions() === charging)) await delay(500);
    assert.equal(sim.counters.stops - stops0, 4, 'the demo and the imported 01 and 05 each stopped their session once');
    if (e12 === example12WantsOn()) assert.equal(Boolean(sim.session('E12-RFID-1')), e12, `example 12 charges ${e12 ? '' : 'not '}in this hour`);
    assert.equal(sim.peakSessions((x) => x.locationId === 'E13-LOC'), 2, 'example 13: two of its six at once');
    await delay(1500);
    const red = (await editorNodes(page)).filter((n) => n.status?.fill === 'red');
    assert.deepEqual(red, [], 'no red status');
    assert.equal(sim.counters.duplicateStarts + sim.counters.duplicateStops, 0, 'no flow competed with another for a connector');
    assert.doesNotMatch(session.log(), /\[error\]|property value missing/);
    await session.shot('examples-deployed');
  });
});
