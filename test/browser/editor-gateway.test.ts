/**
 * The gateway fields of the charging-service dialog in a real browser: a
 * malformed Token parameters value is marked as the user types it, and the API
 * key is a password field whose value never comes back to the editor or an export.
 */
import assert from 'node:assert/strict';
import type { Page } from 'playwright-core';
import { delay } from '../harness';
import { browserSession } from './browser-session';

type AnyRed = { RED: Record<string, any> }; // eslint-disable-line @typescript-eslint/no-explicit-any
const API_KEY = 'gw-Browser-Key-7d21e0';

describe('editor: API key and token parameters (Chromium)', function () {
  this.timeout(120_000);
  const session = browserSession('empty');
  let page: Page;
  before(() => {
    ({ page } = session);
  });

  const marked = async (field: string, value: string): Promise<boolean> => {
    const sel = `#node-config-input-${field}`;
    await page.fill(sel, value);
    await page.dispatchEvent(sel, 'change');
    await delay(150);
    return page.$eval(sel, (e) => e.classList.contains('input-error'));
  };

  it('marks malformed Token parameters and Max requests per second with a red border, and accepts well-formed values', async () => {
    await page.evaluate(() => {
      const RED = (window as unknown as AnyRed).RED;
      RED.view.importNodes([{ id: 'gw-start', type: 'charging-start', z: RED.workspaces.active(), name: '', service: '', x: 300, y: 120, wires: [[]] }]);
      RED.editor.edit(RED.nodes.node('gw-start'));
    });
    await page.waitForSelector('#node-input-locationId', { state: 'attached' });
    await page.click('#node-input-btn-service-add, #node-input-lookup-service');
    await page.waitForSelector('#node-config-input-tokenParams');
    assert.equal(await marked('tokenParams', 'audience'), true, 'no "=": marked');
    assert.equal(await marked('tokenParams', 'audience=x&grant_type=password'), true, 'a reserved parameter: marked');
    assert.equal(await marked('tokenParams', 'audience=https://api.example.com&resource=urn%3Acharging'), false, 'well-formed: not marked');
    assert.equal(await marked('apiKeyHeader', 'Authorization'), true, 'a header the client sets itself: marked');
    assert.equal(await marked('apiKeyHeader', 'x-api-key'), false);
    // Max requests per second (issue 17.3): empty or a number from 0, decimals allowed.
    assert.equal(await marked('maxRequestsPerSec', '-1'), true, 'negative: marked');
    assert.equal(await marked('maxRequestsPerSec', 'abc'), true, 'not a number: marked');
    assert.equal(await marked('maxRequestsPerSec', '0.5'), false, 'a decimal: not marked');
    assert.equal(await marked('maxRequestsPerSec', ''), false, 'empty (no limit): not marked');
    await session.shot('dialog-service-gateway');
  });

  it('the API key is a password field; after deploy it never comes back to the editor or an export', async () => {
    assert.equal(await page.$eval('#node-config-input-apiKey', (e) => (e as HTMLInputElement).type), 'password');
    await page.fill('#node-config-input-baseUrl', session.sim.baseUrl);
    await page.fill('#node-config-input-authUrl', session.sim.authUrl);
    await page.fill('#node-config-input-apiKey', API_KEY);
    await page.click('#node-config-dialog-ok');
    await page.waitForSelector('#node-config-input-baseUrl', { state: 'detached' });
    await page.click('#node-dialog-ok');
    await page.click('#red-ui-header-button-deploy');
    await delay(1500);
    const svcId = await page.evaluate(() => (window as unknown as AnyRed).RED.nodes.node('gw-start').service as string);
    const creds = await page.evaluate(async (id) => (await fetch(`credentials/charging-service/${id}`)).json(), svcId);
    assert.equal(creds.has_apiKey, true, JSON.stringify(creds));
    assert.equal(creds.apiKey, undefined, 'the editor never receives the key');
    const flows = await page.evaluate(async () => (await fetch('flows', { headers: { 'Node-RED-API-Version': 'v2' } })).text());
    assert.ok(!flows.includes(API_KEY), 'not in the deployed flow JSON');
    const exported = await page.evaluate(() => JSON.stringify((window as unknown as AnyRed).RED.nodes.createCompleteNodeSet({ credentials: false })));
    assert.ok(!exported.includes(API_KEY), 'not in an export');
    await page.evaluate((id) => (window as unknown as AnyRed).RED.editor.editConfig('', 'charging-service', id), svcId);
    await page.waitForSelector('#node-config-input-apiKey');
    await delay(500);
    assert.equal(await page.$eval('#node-config-input-apiKey', (e) => (e as HTMLInputElement).value), '__PWRD__', 'masked, not echoed');
    await page.click('#node-config-dialog-cancel');
  });
});
