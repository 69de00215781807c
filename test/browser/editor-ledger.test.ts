/**
 * charging-ledger's dialog typed into like a user in Debian's Chromium against
 * a real Node-RED (browser-session.ts): the time zone (an unknown one refused),
 * the tokens and tariffs tables (what the deploy would refuse is marked before
 * it), the default tariff, and what Done saves.
 */
import assert from 'node:assert/strict';
import type { Page } from 'playwright-core';
import { delay } from '../harness';
import { browserSession } from './browser-session';

const TARIFFS = [{ id: 'home', currency: 'EUR', pricePerKWh: 0.35, windows: [{ days: 'mon-fri', from: '22:00', to: '06:00', pricePerKWh: 0.25 }] }];
const TOKENS = [{ token: 'RFID-1', label: 'Anna', vehicle: 'B-XY 123', tariff: 'home' }];

describe('editor: charging-ledger dialog (Chromium)', function () {
  this.timeout(120_000);
  const session = browserSession('empty');
  let page: Page;
  before(() => {
    ({ page } = session);
  });

  /** Types into a field as a user does, then leaves it; whether the field is marked red. */
  async function typed(selector: string, value: string): Promise<boolean> {
    await page.fill(selector, value);
    await page.dispatchEvent(selector, 'change');
    await delay(150);
    return page.$eval(selector, (e) => e.classList.contains('input-error'));
  }

  it('time zone: an unknown zone is marked red, a real one (Lord Howe, Kathmandu) is not; empty means the host\'s', async () => {
    await page.waitForSelector('.red-ui-palette-node[data-palette-type="charging-ledger"]');
    await page.evaluate(() => {
      const RED = (window as unknown as { RED: Record<string, any> }).RED; // eslint-disable-line @typescript-eslint/no-explicit-any
      RED.view.importNodes([{ id: 'e2e-ledger', type: 'charging-ledger', z: RED.workspaces.active(), x: 340, y: 300, wires: [[], []] }]);
      RED.editor.edit(RED.nodes.node('e2e-ledger'));
    });
    await page.waitForSelector('#node-input-timeZone', { state: 'visible' });
    assert.equal(await typed('#node-input-timeZone', 'Europe/Nowhere'), true, 'an unknown zone');
    assert.equal(await typed('#node-input-timeZone', 'Mars/Olympus_Mons'), true);
    assert.equal(await typed('#node-input-timeZone', 'Australia/Lord_Howe'), false);
    assert.equal(await typed('#node-input-timeZone', 'Asia/Kathmandu'), false);
    assert.equal(await typed('#node-input-timeZone', ''), false, 'empty: the host\'s zone');
    assert.ok(((await page.getAttribute('#node-input-timeZone', 'placeholder')) ?? '').length > 0, 'the host\'s zone as placeholder');
    await page.click('#node-dialog-cancel');
    await page.waitForSelector('#node-input-timeZone', { state: 'detached' });
  });

  it('tokens and tariffs tables: what the deploy would refuse is marked red in the dialog', async () => {
    await page.evaluate(() => {
      const RED = (window as unknown as { RED: Record<string, any> }).RED; // eslint-disable-line @typescript-eslint/no-explicit-any
      RED.editor.edit(RED.nodes.node('e2e-ledger'));
    });
    await page.waitForSelector('#node-input-tariffs', { state: 'visible' });
    const bad = (change: Record<string, unknown>, window: Record<string, unknown> = {}) => JSON.stringify([{ ...TARIFFS[0], ...change, windows: [{ ...TARIFFS[0].windows[0], ...window }] }]);
    assert.equal(await typed('#node-input-tariffs', '[{"id": "home",'), true, 'not JSON');
    assert.equal(await typed('#node-input-tariffs', '{"id": "home"}'), true, 'not a table');
    assert.equal(await typed('#node-input-tariffs', bad({ currency: 'EURO' })), true, 'a currency of four letters');
    assert.equal(await typed('#node-input-tariffs', bad({ pricePerKWh: -0.1 })), true, 'a negative price');
    assert.equal(await typed('#node-input-tariffs', bad({}, { from: '25:00' })), true, 'an hour that does not exist');
    assert.equal(await typed('#node-input-tariffs', bad({}, { days: 'mon-fry' })), true, 'a day that does not exist');
    assert.equal(await typed('#node-input-tariffs', JSON.stringify([TARIFFS[0], TARIFFS[0]])), true, 'the same id twice');
    const why = await page.evaluate(() => {
      const RED = (window as unknown as { RED: Record<string, any> }).RED; // eslint-disable-line @typescript-eslint/no-explicit-any
      return RED.nodes.getType('charging-ledger').defaults.tariffs.validate.call(RED.nodes.node('e2e-ledger'), '[{"id": "home"}]', {});
    });
    assert.match(String(why), /^A table of tariffs: each with a unique id, a three-letter currency/, 'the reason, in words, for the field\'s tooltip');
    assert.equal(await typed('#node-input-tariffs', JSON.stringify(TARIFFS, null, 2)), false, 'a good table');
    assert.equal(await typed('#node-input-tokens', JSON.stringify([{ label: 'no token' }])), true, 'a row without a token');
    assert.equal(await typed('#node-input-tokens', JSON.stringify([{ ...TOKENS[0], tariff: 'office' }])), true, 'a tariff not in the table');
    assert.equal(await typed('#node-input-tokens', JSON.stringify(TOKENS, null, 2)), false, 'a good table');
    assert.equal(await typed('#node-input-defaultTariff', 'office'), true, 'a default tariff not in the table');
    assert.equal(await typed('#node-input-defaultTariff', 'home'), false);
    await typed('#node-input-timeZone', 'Europe/Berlin');
    await session.shot('dialog-ledger');
    await page.click('#node-dialog-ok');
    await page.waitForSelector('#node-input-timeZone', { state: 'detached' });
    const saved = await page.evaluate(() => {
      const n = (window as unknown as { RED: { nodes: { node(id: string): Record<string, unknown> } } }).RED.nodes.node('e2e-ledger');
      return { timeZone: n.timeZone, tokens: n.tokens, tariffs: n.tariffs, defaultTariff: n.defaultTariff, valid: n.valid };
    });
    assert.deepEqual(JSON.parse(String(saved.tariffs)), TARIFFS);
    assert.deepEqual(JSON.parse(String(saved.tokens)), TOKENS);
    assert.deepEqual([saved.timeZone, saved.defaultTariff, saved.valid], ['Europe/Berlin', 'home', true]);
  });

  it('a node saved with an unknown zone is marked invalid (the red triangle) before it is deployed', async () => {
    await page.evaluate(() => {
      const RED = (window as unknown as { RED: Record<string, any> }).RED; // eslint-disable-line @typescript-eslint/no-explicit-any
      RED.editor.edit(RED.nodes.node('e2e-ledger'));
    });
    await page.waitForSelector('#node-input-timeZone', { state: 'visible' });
    await typed('#node-input-timeZone', 'Europe/Nowhere');
    await page.click('#node-dialog-ok');
    await delay(300);
    const valid = await page.evaluate(() => (window as unknown as { RED: { nodes: { node(id: string): { valid: boolean } } } }).RED.nodes.node('e2e-ledger').valid);
    assert.equal(valid, false);
  });
});
