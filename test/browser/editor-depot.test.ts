/**
 * charging-depot's dialog in Debian's Chromium against a real Node-RED
 * (browser-session.ts), reached as a user reaches it: from a control node's
 * Depot field ("Add new charging-depot..."). Its fields and defaults, the
 * validation a user sees (a red border: a limit or a budget is needed), the
 * control node's Priority, the help of both new nodes, and German labels.
 */
import assert from 'node:assert/strict';
import type { Page } from 'playwright-core';
import { delay } from '../harness';
import { browserSession } from './browser-session';

/** Drags a node from the palette onto the open tab and opens its dialog. */
async function dropAndEdit(page: Page, type: string, waitFor: string): Promise<void> {
  const item = `.red-ui-palette-node[data-palette-type="${type}"]`;
  await page.waitForSelector(item);
  await page.evaluate((sel) => document.querySelector(sel)?.scrollIntoView(), item);
  await page.dragAndDrop(item, '#red-ui-workspace-chart', { targetPosition: { x: 400, y: 250 } });
  await page.evaluate(() => {
    const RED = (window as unknown as { RED: Record<string, any> }).RED; // eslint-disable-line @typescript-eslint/no-explicit-any
    const node = RED.view.selection().nodes?.[0];
    if (node) RED.editor.edit(node);
  });
  await page.waitForSelector(waitFor, { state: 'visible' });
}

const marked = (page: Page, sel: string) => page.$eval(sel, (e) => e.classList.contains('input-error'));

async function type(page: Page, sel: string, v: string): Promise<void> {
  await page.fill(sel, v);
  await page.dispatchEvent(sel, 'keyup');
  await page.dispatchEvent(sel, 'change');
  await delay(150);
}

describe('editor: charging-depot (Chromium)', function () {
  this.timeout(120_000);
  const session = browserSession('empty');
  let page: Page;
  before(() => {
    ({ page } = session);
  });

  it('the control node has Depot (a config node, empty by default) and Priority (0; a whole number)', async () => {
    await dropAndEdit(page, 'charging-control', '#node-input-depot');
    assert.equal(await page.$eval('#node-input-priority', (e) => (e as HTMLInputElement).value), '0');
    assert.equal(await page.$eval('label[for="node-input-depot"]', (e) => e.textContent?.trim()), 'Depot');
    for (const [bad, good] of [['1.5', '2'], ['high', '-3'], ['1001', '1000']]) {
      await type(page, '#node-input-priority', bad);
      assert.equal(await marked(page, '#node-input-priority'), true, bad);
      await type(page, '#node-input-priority', good);
      assert.equal(await marked(page, '#node-input-priority'), false, good);
    }
  });

  it('"Add new charging-depot…" from the Depot field: its fields and defaults; neither limit nor budget is marked, either one is enough', async () => {
    await page.click('#node-input-btn-depot-add');
    await page.waitForSelector('#node-config-input-limit', { state: 'visible' });
    const value = (f: string) => page.$eval(`#node-config-input-${f}`, (e) => (e as HTMLInputElement).value);
    const fields = ['limit', 'budgetKW', 'assumedKW', 'minRun', 'turn', 'aging', 'idleKWh', 'idleWindow', 'overFor'];
    assert.deepEqual(await Promise.all(fields.map(value)), ['', '', '11', '600', '0', '3600', '0.1', '1800', '60']);
    assert.equal(await page.isChecked('#node-config-input-countStation'), true);
    assert.equal(await value('onOver'), 'shed');
    await type(page, '#node-config-input-assumedKW', '11'); // a change anywhere validates the dialog
    assert.equal(await marked(page, '#node-config-input-limit'), true, 'no limit and no budget: marked');
    assert.equal(await marked(page, '#node-config-input-budgetKW'), true);
    await type(page, '#node-config-input-limit', '2');
    assert.equal(await marked(page, '#node-config-input-limit'), false);
    assert.equal(await marked(page, '#node-config-input-budgetKW'), false, 'the budget may stay empty now: re-checked as the limit was typed');
    for (const [field, bad, good] of [['limit', '1.5', '2'], ['limit', '0', '6'], ['budgetKW', '0', '7,4'], ['budgetKW', 'lots', '22'], ['turn', '-1', '1800'], ['assumedKW', '0', '11']]) {
      await type(page, `#node-config-input-${field}`, bad);
      assert.equal(await marked(page, `#node-config-input-${field}`), true, `${field} ${bad}`);
      await type(page, `#node-config-input-${field}`, good);
      assert.equal(await marked(page, `#node-config-input-${field}`), false, `${field} ${good}`);
    }
    await type(page, '#node-config-input-limit', '');
    assert.equal(await marked(page, '#node-config-input-limit'), false, 'a budget alone is enough');
    await type(page, '#node-config-input-limit', '2');
    await session.shot('dialog-depot');
    await page.click('#node-config-dialog-ok');
    await page.waitForSelector('#node-config-input-limit', { state: 'detached' });
    const label = await page.$eval('#node-input-depot option:checked', (e) => e.textContent?.trim());
    assert.equal(label, 'depot (2 at once, 22 kW)', 'the new depot is selected, named by its limits');
    await page.click('#node-dialog-cancel');
  });

  it('help: the depot\'s Properties and Details; the status node\'s Inputs, Outputs and Details', async () => {
    const help = async (type: string) => {
      await page.evaluate((t) => (window as unknown as { RED: { sidebar: { help: { show(t: string): void } } } }).RED.sidebar.help.show(t), type);
      await page.waitForFunction((t) => Array.from(document.querySelectorAll('.red-ui-help')).some((e) => (e.textContent ?? '').includes(t === 'charging-depot' ? 'admits' : 'kWSource')), type);
      return {
        headings: await page.$$eval('.red-ui-help h3', (els) => els.map((e) => e.textContent?.trim())),
        text: (await page.$$eval('.red-ui-help', (els) => els.map((e) => e.textContent ?? ''))).join(' '),
      };
    };
    const depot = await help('charging-depot');
    for (const h of ['Properties', 'Details']) assert.ok(depot.headings.includes(h), h);
    for (const w of ['limit', 'budgetKW', 'assumedKW', 'minRun', 'turn', 'aging', 'idleKWh', 'countStation', 'onOver', 'queued', 'Break before make']) assert.ok(depot.text.includes(w), w);
    const status = await help('charging-depot-status');
    for (const h of ['Inputs', 'Outputs', 'Details']) assert.ok(status.headings.includes(h), h);
    for (const w of ['msg.limit', 'budgetKW', 'entries', 'kWSource', 'INVALID_INPUT', '3/4 in use · 5 waiting']) assert.ok(status.text.includes(w) || status.text.includes(w.replace('msg.', '')), w);
  });

  it('in German: the depot dialog\'s labels', async () => {
    await page.evaluate(() => localStorage.setItem('editor-language', 'de'));
    try {
      await page.reload();
      await page.waitForSelector('#red-ui-palette-container', { timeout: 60_000 });
      await dropAndEdit(page, 'charging-control', '#node-input-depot');
      assert.equal(await page.$eval('label[for="node-input-priority"]', (e) => e.textContent?.trim()), 'Priorität');
      await page.click('#node-input-btn-depot-add');
      await page.waitForSelector('#node-config-input-limit', { state: 'visible' });
      assert.equal(await page.$eval('label[for="node-config-input-limit"]', (e) => e.textContent?.trim()), 'Grenze');
      assert.equal(await page.$eval('label[for="node-config-input-countStation"]', (e) => e.textContent?.trim()), 'An der Station gestartete Sitzungen mitzählen (nie vom Depot gestoppt)');
      assert.deepEqual(await page.$$eval('#node-config-input-onOver option', (os) => os.map((o) => o.textContent?.trim())), ['Sitzungen stoppen, eine nach der anderen', 'niemanden neu starten']);
      await page.click('#node-config-dialog-cancel');
      await page.click('#node-dialog-cancel');
    } finally {
      await page.evaluate(() => localStorage.removeItem('editor-language'));
    }
  });
});
