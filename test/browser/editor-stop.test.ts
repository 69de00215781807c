/**
 * charging-stop's "Make sure it ends" in the editor, typed into like a user in
 * Debian's Chromium against a real Node-RED (browser-session.ts).
 */
import assert from 'node:assert/strict';
import type { Page } from 'playwright-core';
import { delay } from '../harness';
import { browserSession } from './browser-session';

describe('editor: charging-stop "Make sure it ends", charging-progress "Keep state in" (Chromium)', function () {
  this.timeout(120_000);
  const session = browserSession('empty');
  let page: Page;
  before(() => {
    ({ page } = session);
  });

  it('ticking "Make sure it ends" shows the attempts; 11 and 0 get a red border, 3 does not', async () => {
    await page.waitForSelector('.red-ui-palette-node[data-palette-type="charging-stop"]');
    await page.evaluate(() => {
      const RED = (window as unknown as { RED: Record<string, any> }).RED; // eslint-disable-line @typescript-eslint/no-explicit-any
      RED.view.importNodes([{ id: 'e2e-stop', type: 'charging-stop', z: RED.workspaces.active(), name: '', service: '', x: 340, y: 300, wires: [[]] }]);
      RED.editor.edit(RED.nodes.node('e2e-stop'));
    });
    await page.waitForSelector('#node-input-ensureAttempts', { state: 'attached' });
    assert.equal(await page.isVisible('#node-input-ensureAttempts'), false, 'hidden until asked for');
    await page.check('#node-input-wait');
    await page.check('#node-input-ensure');
    await page.waitForSelector('#node-input-ensureAttempts', { state: 'visible' });
    const marked = async (value: string): Promise<boolean> => {
      await page.fill('#node-input-ensureAttempts', value); // fires input/keyup/change like typing
      await page.dispatchEvent('#node-input-ensureAttempts', 'change');
      await delay(150);
      return page.$eval('#node-input-ensureAttempts', (e) => e.classList.contains('input-error'));
    };
    assert.equal(await marked('11'), true, '11 is out of range');
    assert.equal(await marked('0'), true, '0 is out of range');
    assert.equal(await marked('3'), false, '3 is fine');
    const label = await page.$eval('label[for="node-input-ensure"]', (e) => e.textContent?.trim());
    assert.equal(label, 'Make sure it ends');
    await session.shot('dialog-stop-ensure');
    await page.click('#node-dialog-cancel');
  });

  it('"Keep state in" lists the context stores of settings.js (default and file), only in watch mode; the choice is saved', async () => {
    await page.evaluate(() => {
      const RED = (window as unknown as { RED: Record<string, any> }).RED; // eslint-disable-line @typescript-eslint/no-explicit-any
      RED.view.importNodes([
        { id: 'e2e-watch', type: 'charging-progress', z: RED.workspaces.active(), name: '', service: '', mode: 'watch', interval: 10, x: 340, y: 380, wires: [[]] },
        { id: 'e2e-gone', type: 'charging-progress', z: RED.workspaces.active(), name: '', service: '', mode: 'watch', interval: 10, contextStore: 'gone', x: 340, y: 460, wires: [[]] },
      ]);
      RED.editor.edit(RED.nodes.node('e2e-watch'));
    });
    await page.waitForSelector('#node-input-contextStore', { state: 'visible' });
    const options = () => page.$$eval('#node-input-contextStore option', (os) => os.map((o) => [(o as HTMLOptionElement).value, o.textContent ?? '']));
    assert.deepEqual(await options(), [['', 'default store (default)'], ['file', 'file']]);
    assert.equal(await page.$eval('#node-input-contextStore', (e) => (e as HTMLSelectElement).value), '', 'the default store unless chosen');
    const label = await page.$eval('label[for="node-input-contextStore"]', (e) => e.textContent?.trim());
    assert.equal(label, 'Keep state in');
    await page.selectOption('#node-input-mode', 'query');
    assert.equal(await page.isVisible('#node-input-contextStore'), false, 'hidden in query mode');
    await page.selectOption('#node-input-mode', 'watch');
    await page.selectOption('#node-input-contextStore', 'file');
    await session.shot('dialog-progress-store');
    await page.click('#node-dialog-ok');
    await delay(300);
    const saved = await page.evaluate(() => (window as unknown as { RED: { nodes: { node(id: string): { contextStore: string } } } }).RED.nodes.node('e2e-watch').contextStore);
    assert.equal(saved, 'file');
    // A store no longer in settings.js stays selected rather than silently changing to the default.
    await page.evaluate(() => {
      const RED = (window as unknown as { RED: Record<string, any> }).RED; // eslint-disable-line @typescript-eslint/no-explicit-any
      RED.editor.edit(RED.nodes.node('e2e-gone'));
    });
    await page.waitForSelector('#node-input-contextStore', { state: 'visible' });
    assert.equal(await page.$eval('#node-input-contextStore', (e) => (e as HTMLSelectElement).value), 'gone');
    await page.click('#node-dialog-cancel');
  });
});
