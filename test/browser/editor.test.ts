/**
 * The editor in a real browser: Debian's Chromium driven by playwright-core,
 * against a real Node-RED started the way `npm start` starts it, with our nodes
 * and the simulator; on both passes (Node-RED 4 and 5). See browser-session.ts.
 */
import assert from 'node:assert/strict';
import type { Page } from 'playwright-core';
import type { ChargingServiceSimulator } from '../../simulator/simulator';
import { CLIENT_ID, CLIENT_SECRET, delay } from '../harness';
import { browserSession } from './browser-session';

describe('editor in a real browser (Chromium + playwright-core)', function () {
  this.timeout(120_000);
  const session = browserSession('empty', { startDelayMs: 300 });
  let page: Page;
  let sim: ChargingServiceSimulator;
  before(() => {
    ({ page, sim } = session);
  });
  const shot = (name: string) => session.shot(name);

  it('shows our nodes in their own palette category, with icons and labels', async () => {
    for (const type of ['charging-start', 'charging-progress', 'charging-stop', 'charging-control', 'charging-ledger', 'charging-metrics', 'charging-depot-status']) {
      await page.waitForSelector(`.red-ui-palette-node[data-palette-type="${type}"]`);
    }
    // The palette breaks a label of two words over two lines: its text is read as one.
    const labels = await page.$$eval('.red-ui-palette-node[data-palette-type^="charging-"] .red-ui-palette-label', (els) => els.map((e) => e.textContent?.trim().replace(/\s+/g, ' ')));
    assert.deepEqual([...labels].sort(), ['control', 'depot status', 'ledger', 'metrics', 'progress', 'start', 'stop']);
    const depotIcon = await page.$eval('.red-ui-palette-node[data-palette-type="charging-depot-status"] .red-ui-palette-icon', (e) => getComputedStyle(e).backgroundImage);
    assert.match(depotIcon, /charging-depot-status\.svg/);
    const icon = await page.$eval('.red-ui-palette-node[data-palette-type="charging-start"] .red-ui-palette-icon', (e) => getComputedStyle(e).backgroundImage);
    assert.match(icon, /charging-start\.svg/);
    const types = await page.evaluate(() => (window as unknown as { RED: { nodes: { getType(t: string): unknown } } }).RED.nodes.getType('charging-service') !== undefined);
    assert.ok(types, 'the config node type is registered');
    await page.evaluate(() => document.querySelector('.red-ui-palette-node[data-palette-type="charging-start"]')?.scrollIntoView());
    await shot('palette');
  });

  it('a node without a service is invalid; its dialog opens with typed inputs and help, and validates', async () => {
    await page.evaluate(() => {
      const RED = (window as unknown as { RED: Record<string, any> }).RED; // eslint-disable-line @typescript-eslint/no-explicit-any
      RED.view.importNodes([
        { id: 'e2e-inject', type: 'inject', z: RED.workspaces.active(), name: 'go', props: [{ p: 'payload' }], payload: '{"locationId":"E2E-LOC","evseId":"1","token":"E2E-RFID"}', payloadType: 'json', repeat: '', once: false, x: 150, y: 200, wires: [['e2e-start']] },
        { id: 'e2e-start', type: 'charging-start', z: RED.workspaces.active(), name: '', service: '', x: 340, y: 200, wires: [['e2e-progress']] },
        { id: 'e2e-progress', type: 'charging-progress', z: RED.workspaces.active(), name: '', service: '', x: 560, y: 200, wires: [[]] },
      ]);
    });
    const valid = await page.evaluate(() => (window as unknown as { RED: { nodes: { node(id: string): { valid: boolean } } } }).RED.nodes.node('e2e-start').valid);
    assert.equal(valid, false, 'no service selected: invalid');
    await page.evaluate(() => (window as unknown as { RED: { editor: { edit(n: unknown): void }; nodes: { node(id: string): unknown } } }).RED.editor.edit((window as unknown as { RED: { nodes: { node(id: string): unknown } } }).RED.nodes.node('e2e-start')));
    await page.waitForSelector('#node-input-locationId', { state: 'attached' });
    await page.waitForSelector('.red-ui-typedInput-container');
    const typed = await page.$$eval('.red-ui-typedInput-container', (els) => els.length);
    assert.ok(typed >= 3, `typed inputs: ${typed}`);
    const placeholder = await page.$eval('#node-input-locationId', (e) => (e as HTMLInputElement).placeholder);
    assert.equal(placeholder, 'from msg.payload.locationId');
    await shot('dialog-start');
  });

  it('creates a charging-service config with credentials; Test connection reports a token without showing it', async () => {
    // The pencil beside the Service field adds a new configuration node.
    await page.click('#node-input-btn-service-add, #node-input-lookup-service');
    await page.waitForSelector('#node-config-input-baseUrl');
    // Validation as the user meets it: type into the field, see the red border and, on hover, the reason.
    const typeAndLook = async (field: string, value: string): Promise<{ marked: boolean; tip: string }> => {
      const sel = `#node-config-input-${field}`;
      await page.fill(sel, value); // fires input/keyup/change like typing
      await page.dispatchEvent(sel, 'change');
      await delay(150);
      const marked = await page.$eval(sel, (e) => e.classList.contains('input-error'));
      await page.hover(sel);
      await delay(1100); // Node-RED opens the tooltip after 750 ms of hover
      const tip = await page.evaluate(() => Array.from(document.querySelectorAll('.red-ui-popover')).map((e) => e.textContent ?? '').join(' | '));
      await page.mouse.move(0, 0);
      await delay(200);
      return { marked, tip };
    };
    const noScheme = await typeAndLook('baseUrl', '127.0.0.1:18080');
    assert.equal(noScheme.marked, true, 'a URL without scheme is marked');
    assert.match(noScheme.tip, /Enter a URL starting with https:\/\//);
    const remoteHttp = await typeAndLook('authUrl', 'http://example.com/auth');
    assert.equal(remoteHttp.marked, true, 'plain http to a remote host is marked');
    assert.match(remoteHttp.tip, /Use https, or tick "Allow insecure http"/);
    const zero = await typeAndLook('timeout', '0');
    assert.equal(zero.marked, true, 'Timeout 0 is marked');
    assert.match(zero.tip, /Enter a number from 1 to 300/);
    await shot('dialog-service-invalid');
    // Ticking "Allow insecure http" clears the http mark at once; good values clear the others.
    await page.check('#node-config-input-allowInsecureHttp');
    await delay(150);
    assert.equal(await page.$eval('#node-config-input-authUrl', (e) => e.classList.contains('input-error')), false);
    await page.uncheck('#node-config-input-allowInsecureHttp');
    assert.equal((await typeAndLook('timeout', '10')).marked, false);
    assert.equal((await typeAndLook('baseUrl', '${CHARGING_BASE_URL}')).marked, false, 'an environment reference is accepted');
    // Authentication: a select with the three methods and one line of help each.
    const methods = await page.$$eval('#node-config-input-authMethod option', (els) => els.map((e) => (e as HTMLOptionElement).value));
    assert.deepEqual(methods, ['basic', 'basic-form-encoded', 'client_secret_post']);
    await page.selectOption('#node-config-input-authMethod', 'client_secret_post');
    assert.match(String(await page.textContent("#node-config-charging-auth-help")), /sent as form fields/);
    await page.selectOption('#node-config-input-authMethod', 'basic');
    await page.fill('#node-config-input-name', 'simulator');
    await page.fill('#node-config-input-baseUrl', sim.baseUrl);
    await page.fill('#node-config-input-authUrl', sim.authUrl);
    await page.fill('#node-config-input-clientId', CLIENT_ID);
    await page.fill('#node-config-input-clientSecret', CLIENT_SECRET);
    await page.click('#node-config-charging-test');
    await page.waitForFunction(() => /Connected|failed|Authentication|but/.test(document.querySelector('#node-config-charging-test-result')?.textContent ?? ''));
    const result = await page.textContent('#node-config-charging-test-result');
    assert.match(String(result), /Connected: token received \(valid 1800 s\); the service at http:\/\/127\.0\.0\.1:\d+ answers/);
    assert.ok(!String(result).includes(CLIENT_SECRET));
    await shot('dialog-service');
    await page.click('#node-config-dialog-ok');
    await page.waitForSelector('#node-config-input-baseUrl', { state: 'detached' });
    await page.click('#node-dialog-ok');
    await delay(300);
    const valid = await page.evaluate(() => (window as unknown as { RED: { nodes: { node(id: string): { valid: boolean } } } }).RED.nodes.node('e2e-start').valid);
    assert.equal(valid, true, 'with a service the start node is valid');
    // Give the progress node the same service, in code: the dialog path is proven above.
    await page.evaluate(() => {
      const RED = (window as unknown as { RED: Record<string, any> }).RED; // eslint-disable-line @typescript-eslint/no-explicit-any
      const svc = RED.nodes.node(RED.nodes.node('e2e-start').service);
      const p = RED.nodes.node('e2e-progress');
      p.service = svc.id;
      svc.users.push(p);
      p.dirty = true;
      p.changed = true;
      RED.nodes.dirty(true);
      RED.editor.validateNode(p);
      RED.view.redraw(true);
    });
  });

  it('deploys; the status badges show the started session; the secret never comes back to the editor', async () => {
    await page.click('#red-ui-header-button-deploy');
    await page.waitForFunction(() => !document.querySelector('#red-ui-header-button-deploy')?.classList.contains('disabled') || true);
    await delay(1500);
    const injected = await page.evaluate(async () => (await fetch('inject/e2e-inject', { method: 'POST' })).status);
    assert.equal(injected, 200);
    await page.waitForFunction(() => Array.from(document.querySelectorAll('.red-ui-flow-node-status-label')).some((e) => /start accepted/.test(e.textContent ?? '')), undefined, { timeout: 15_000 });
    await page.waitForFunction(() => Array.from(document.querySelectorAll('.red-ui-flow-node-status-label')).some((e) => /pending|charging/.test(e.textContent ?? '')), undefined, { timeout: 15_000 });
    await shot('deployed-status');
    assert.equal(sim.counters.starts, 1);

    const svcId = await page.evaluate(() => (window as unknown as { RED: { nodes: { node(id: string): { service: string } } } }).RED.nodes.node('e2e-start').service);
    const creds = await page.evaluate(async (id) => (await fetch(`credentials/charging-service/${id}`)).json(), svcId);
    assert.equal(creds.clientId, CLIENT_ID);
    assert.equal(creds.has_clientSecret, true);
    assert.equal(creds.clientSecret, undefined, 'the editor never receives the secret');
    const flows = await page.evaluate(async () => (await fetch('flows', { headers: { 'Node-RED-API-Version': 'v2' } })).text());
    assert.ok(!flows.includes(CLIENT_SECRET), 'not in the deployed flow JSON');
    const exported = await page.evaluate(() => JSON.stringify((window as unknown as { RED: { nodes: { createCompleteNodeSet(o: unknown): unknown } } }).RED.nodes.createCompleteNodeSet({ credentials: false })));
    assert.ok(!exported.includes(CLIENT_SECRET), 'not in an export');
  });

  it('shows help in the sidebar with Inputs, Outputs and Details', async () => {
    await page.evaluate(() => {
      const RED = (window as unknown as { RED: Record<string, any> }).RED; // eslint-disable-line @typescript-eslint/no-explicit-any
      RED.view.select('e2e-progress');
      RED.sidebar.help.show('charging-progress');
    });
    await page.waitForSelector('.red-ui-help h3');
    const headings = await page.$$eval('.red-ui-help h3', (els) => els.map((e) => e.textContent?.trim()));
    for (const h of ['Inputs', 'Outputs', 'Details']) assert.ok(headings.includes(h), `help has ${h}: ${headings.join(', ')}`);
    const props = await page.$$eval('.red-ui-help dl.message-properties', (els) => els.length);
    assert.ok(props >= 2);
    await shot('help-progress');
  });

  it('opens the config dialog again with the secret masked, never echoed', async () => {
    await page.evaluate(() => {
      const RED = (window as unknown as { RED: Record<string, any> }).RED; // eslint-disable-line @typescript-eslint/no-explicit-any
      RED.editor.editConfig('', 'charging-service', RED.nodes.node('e2e-start').service);
    });
    await page.waitForSelector('#node-config-input-clientSecret');
    await delay(500);
    const value = await page.$eval('#node-config-input-clientSecret', (e) => (e as HTMLInputElement).value);
    assert.notEqual(value, CLIENT_SECRET);
    assert.equal(value, '__PWRD__');
    await shot('dialog-service-reopened');
    await page.click('#node-config-dialog-cancel');
  });
});
