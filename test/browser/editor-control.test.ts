/**
 * charging-control's dialog in Debian's Chromium against a real Node-RED
 * (browser-session.ts): its fields, the validation a user sees (a red border),
 * the German labels, and the help with Inputs, Outputs and Details.
 */
import assert from 'node:assert/strict';
import type { Page } from 'playwright-core';
import { delay } from '../harness';
import { browserSession } from './browser-session';

/** Drags a control node from the palette onto the open tab, as a user does, and opens its dialog. */
async function openDialog(page: Page): Promise<string> {
  await page.waitForSelector('.red-ui-palette-node[data-palette-type="charging-control"]');
  await page.evaluate(() => document.querySelector('.red-ui-palette-node[data-palette-type="charging-control"]')?.scrollIntoView());
  await page.dragAndDrop('.red-ui-palette-node[data-palette-type="charging-control"]', '#red-ui-workspace-chart', { targetPosition: { x: 400, y: 250 } });
  const id = await page.evaluate(() => {
    const RED = (window as unknown as { RED: Record<string, any> }).RED; // eslint-disable-line @typescript-eslint/no-explicit-any
    const node = RED.view.selection().nodes?.[0] ?? null;
    if (node) RED.editor.edit(node);
    return node ? String(node.id) : '';
  });
  assert.ok(id, 'a node was dropped');
  await page.waitForSelector('#node-input-guard', { state: 'visible' });
  return id;
}

const label = (page: Page, field: string) => page.$eval(`label[for="node-input-${field}"]`, (e) => e.textContent?.trim() ?? '');

describe('editor: charging-control (Chromium)', function () {
  this.timeout(120_000);
  const session = browserSession('empty');
  let page: Page;
  before(() => {
    ({ page } = session);
  });

  it('the dialog has the target as typed inputs, guard, check interval, wait, attempts, retry, delays, energy limit, enforce and Keep state in, with their defaults', async () => {
    await openDialog(page);
    for (const f of ['service', 'locationId', 'evseId', 'token', 'guard', 'checkInterval', 'waitTimeout', 'startAttempts', 'retryInterval', 'onDelay', 'offDelay', 'energyLimit', 'enforce', 'contextStore', 'name']) {
      assert.equal(await page.$$eval(`#node-input-${f}`, (els) => els.length), 1, f);
    }
    const value = (f: string) => page.$eval(`#node-input-${f}`, (e) => (e as HTMLInputElement).value);
    assert.deepEqual([await value('guard'), await value('checkInterval'), await value('waitTimeout'), await value('startAttempts')], ['300', '30', '60', '2']);
    assert.deepEqual([await value('retryInterval'), await value('onDelay'), await value('offDelay'), await value('energyLimit')], ['600', '0', '0', '']);
    assert.equal(await page.isChecked('#node-input-enforce'), false);
    assert.equal(await page.$$eval('.red-ui-typedInput-container', (els) => els.length), 3, 'locationId, evseId, token');
    assert.equal(await page.$eval('#node-input-token', (e) => (e as HTMLInputElement).placeholder), 'from msg.target.token');
    assert.equal(await label(page, 'guard'), 'Guard');
    assert.equal(await label(page, 'enforce'), "Stop sessions started at the station while wanted off (only sessions of this node's RFID token: progress is read by token)");
    assert.deepEqual(await page.$$eval('#node-input-contextStore option', (os) => os.map((o) => (o as HTMLOptionElement).value)), ['', 'file']);
    await session.shot('dialog-control');
  });

  it('what a user types wrong gets a red border: guard -1, a check every 0 s, 6 or 1.5 STARTs, a wait of 0 s; right values do not', async () => {
    const marked = async (field: string, v: string): Promise<boolean> => {
      await page.fill(`#node-input-${field}`, v);
      await page.dispatchEvent(`#node-input-${field}`, 'change');
      await delay(150);
      return page.$eval(`#node-input-${field}`, (e) => e.classList.contains('input-error'));
    };
    for (const [field, bad, good] of [['guard', '-1', '0'], ['checkInterval', '0', '30'], ['startAttempts', '6', '5'], ['startAttempts', '1.5', '1'], ['waitTimeout', '0', '60'], ['guard', 'soon', '300'], ['retryInterval', '-5', '0'], ['energyLimit', '-1', ''], ['energyLimit', '20;5', '20,5']]) {
      assert.equal(await marked(field, bad), true, `${field} ${bad}`);
      assert.equal(await marked(field, good), false, `${field} ${good}`);
    }
    await page.fill('#node-input-startAttempts', '9');
    await page.dispatchEvent('#node-input-startAttempts', 'change');
    await page.hover('#node-input-startAttempts');
    await delay(1100); // Node-RED opens the tooltip after 750 ms of hover
    const tip = await page.$$eval('.red-ui-popover', (els) => els.map((e) => e.textContent ?? '').join(' '));
    assert.match(tip, /Enter a number from 1 to 5/);
    await page.click('#node-dialog-cancel');
  });

  it('a node saved before retry and delays existed is valid, and its dialog shows their defaults', async () => {
    // The previous test's dialog closes with an animation: its fields must be gone before this one opens.
    await page.waitForFunction(() => document.querySelectorAll('#node-input-guard').length === 0);
    const id = await page.evaluate(() => {
      const RED = (window as unknown as { RED: Record<string, any> }).RED; // eslint-disable-line @typescript-eslint/no-explicit-any
      const tab = RED.workspaces.active();
      // As the previous version saved it: no retryInterval, onDelay, offDelay, energyLimit.
      RED.view.importNodes([{ id: 'old-control', type: 'charging-control', z: tab, name: 'old', service: '', locationId: 'L', locationIdType: 'str', evseId: '1', evseIdType: 'str', token: 'T', tokenType: 'str', guard: 300, checkInterval: 30, waitTimeout: 60, startAttempts: 2, enforce: false, contextStore: '', x: 300, y: 400, wires: [[]] }], { generateIds: true, addFlow: false });
      const node = RED.view.selection().nodes?.[0];
      // The service is missing (no configuration in this editor): count only the properties' own validity.
      const d = node._def.defaults;
      const invalid = ['retryInterval', 'onDelay', 'offDelay', 'energyLimit'].filter((k) => d[k].validate && d[k].validate.call(node, node[k], {}) !== true);
      RED.editor.edit(node);
      return { id: String(node.id), invalid };
    });
    assert.deepEqual(id.invalid, [], 'the new settings are valid when absent');
    await page.waitForSelector('#node-input-retryInterval', { state: 'visible' });
    const value = (f: string) => page.$eval(`#node-input-${f}`, (e) => (e as HTMLInputElement).value);
    assert.deepEqual([await value('retryInterval'), await value('onDelay'), await value('offDelay'), await value('energyLimit')], ['600', '0', '0', '']);
    assert.equal(await page.$eval('#node-input-retryInterval', (e) => e.classList.contains('input-error')), false);
    await page.click('#node-dialog-cancel');
  });

  it('help in the sidebar: Inputs, Outputs and Details, with the states and the guard', async () => {
    await page.evaluate(() => (window as unknown as { RED: { sidebar: { help: { show(t: string): void } } } }).RED.sidebar.help.show('charging-control'));
    await page.waitForSelector('.red-ui-help h3');
    const headings = await page.$$eval('.red-ui-help h3', (els) => els.map((e) => e.textContent?.trim()));
    for (const h of ['Inputs', 'Outputs', 'Details']) assert.ok(headings.includes(h), `help has ${h}: ${headings.join(', ')}`);
    assert.ok((await page.$$eval('.red-ui-help dl.message-properties', (els) => els.length)) >= 2);
    const text = (await page.$$eval('.red-ui-help', (els) => els.map((e) => e.textContent ?? ''))).join(' ');
    for (const word of ['idle', 'starting', 'charging', 'stopping', 'guard', 'failed', 'msg.force', 'ended at the station']) assert.ok(text.includes(word), word);
    await session.shot('help-control');
  });

  it('in German: the dialog labels, the placeholders and the node\'s label on the canvas', async () => {
    await page.evaluate(() => localStorage.setItem('editor-language', 'de'));
    try {
      await page.reload();
      await page.waitForSelector('#red-ui-palette-container', { timeout: 60_000 });
      await openDialog(page);
      assert.equal(await label(page, 'guard'), 'Sperrzeit');
      assert.equal(await label(page, 'checkInterval'), 'Prüfen alle');
      assert.equal(await label(page, 'waitTimeout'), 'Höchstens warten');
      assert.equal(await label(page, 'enforce'), 'An der Station gestartete Sitzungen stoppen, solange aus gewünscht ist (nur Sitzungen des RFID-Tokens dieses Knotens: der Fortschritt wird per Token gelesen)');
      assert.equal(await label(page, 'contextStore'), 'Zustand speichern in');
      assert.equal(await page.$eval('#node-input-evseId', (e) => (e as HTMLInputElement).placeholder), 'aus msg.target.evseId');
      assert.match(await page.$eval('#node-input-contextStore option', (e) => e.textContent ?? ''), /^Standardspeicher/);
      await session.shot('dialog-control-de');
      await page.click('#node-dialog-cancel');
      const shown = await page.$$eval('.red-ui-flow-node-label', (els) => els.map((e) => e.textContent?.trim()));
      assert.ok(shown.includes('Laden steuern'), shown.join(', '));
    } finally {
      await page.evaluate(() => localStorage.removeItem('editor-language'));
    }
  });
});
