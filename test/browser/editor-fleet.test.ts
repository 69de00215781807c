/**
 * *Coordinate replicas* in the charging-service dialog, in a real browser on a
 * real Node-RED: the group's fields (the Redis URL a password field), the red
 * border for a bad fleet key or URL as the user types, and Test connection's
 * Redis lines (one per live replica) against a password-protected redis-server,
 * first with the URL typed, then with the stored one after a deploy; a
 * redis-sentinel:// URL typed (the dialog says the forms), and Test
 * connection naming the primary the sentinels agree on.
 */
import assert from 'node:assert/strict';
import type { Page } from 'playwright-core';
import { Fleet } from '../../nodes/lib/fleet/fleet';
import { delay } from '../harness';
import { RedisServer, REDIS_SERVER, requireRedis } from '../redis-server';
import { RedisSentinel, PRIMARY_NAME } from '../redis-sentinel';
import { browserSession } from './browser-session';

type AnyRed = { RED: Record<string, any> }; // eslint-disable-line @typescript-eslint/no-explicit-any
const PASSWORD = 'br0wser-Redis:pa55/word';

describe('editor: Coordinate replicas (Chromium)', function () {
  this.timeout(120_000);
  const session = browserSession('empty');
  let page: Page;
  let redis: RedisServer | null = null;
  let other: Fleet | null = null;
  const fleetKey = `editor-${process.pid}`;
  before(async () => {
    ({ page } = session);
    if (REDIS_SERVER) redis = await RedisServer.start({ password: PASSWORD, persist: false });
  });
  after(async () => {
    await other?.close();
    await redis?.close();
  });

  const marked = async (field: string, value: string): Promise<boolean> => {
    const sel = `#node-config-input-${field}`;
    await page.fill(sel, value);
    await page.dispatchEvent(sel, 'change');
    await delay(150);
    return page.$eval(sel, (e) => e.classList.contains('input-error'));
  };
  /** Clicks Test connection and waits for the Redis lines; returns them. */
  const testRedis = async (): Promise<string[]> => {
    await page.click('#node-config-charging-test');
    await page.waitForFunction(() => /answers|Redis|refused|reach/.test(document.querySelector('#node-config-charging-test-redis')?.textContent ?? '') && !/Checking/.test(document.querySelector('#node-config-charging-test-redis')?.textContent ?? ''), undefined, { timeout: 20_000 });
    return page.$$eval('#node-config-charging-test-redis > div', (els) => els.map((e) => e.textContent ?? ''));
  };

  it('the group has a password field for the Redis URL, the fleet key and a TLS select; a bad fleet key or URL gets a red border, a good one clears it', async () => {
    await page.evaluate(() => {
      const RED = (window as unknown as AnyRed).RED;
      RED.view.importNodes([{ id: 'fleet-start', type: 'charging-start', z: RED.workspaces.active(), name: '', service: '', x: 300, y: 120, wires: [[]] }]);
      RED.editor.edit(RED.nodes.node('fleet-start'));
    });
    await page.waitForSelector('#node-input-locationId', { state: 'attached' });
    await page.click('#node-input-btn-service-add, #node-input-lookup-service');
    await page.waitForSelector('#node-config-input-coordination');
    assert.equal(await page.$eval('#node-config-input-coordination', (e) => (e as HTMLInputElement).type), 'password');
    assert.equal(await page.getAttribute('#node-config-input-coordination', 'placeholder'), 'redis://redis:6379');
    assert.match(String(await page.getAttribute('#node-config-input-fleetKey', 'placeholder')), /derived/);
    assert.equal(await page.$eval('#node-config-input-fleetTls', (e) => e.tagName), 'SELECT', 'Node-RED made the TLS field a config-node select');
    assert.match(String(await page.textContent('#red-ui-editor-stack')), /Coordinate replicas/);

    assert.equal(await marked('fleetKey', 'has space'), true, 'a space: marked');
    assert.equal(await marked('fleetKey', 'a{b}'), true, 'braces: marked');
    assert.equal(await marked('fleetKey', 'x'.repeat(65)), true, '65 characters: marked');
    assert.equal(await marked('fleetKey', 'site-a.fleet_1:eu'), false, 'letters, digits and . _ : -: cleared');
    assert.equal(await marked('fleetKey', ''), false, 'empty (derived): not marked');
    assert.equal(await marked('coordination', 'http://redis:6379'), true, 'not redis://: marked');
    assert.equal(await marked('coordination', 'redis-host:6379'), true, 'no scheme: marked');
    assert.equal(await marked('coordination', 'rediss://:pw@redis.example:6380'), false, 'rediss:// with a password: cleared');
    assert.equal(await marked('coordination', '${REDIS_URL}'), false, '${NAME}: not marked');
    assert.equal(await marked('coordination', ''), false, 'empty (off): not marked');
    await page.$eval('#node-config-input-fleetTls', (e) => e.scrollIntoView({ block: 'end' }));
    await session.shot('dialog-service-fleet');
  });

  it('Test connection with a typed Redis URL shows Redis answering and one line per live replica, never the password', async function () {
    requireRedis(this);
    const url = (redis as RedisServer).url;
    // A replica of the fleet elsewhere (this test process), watching two tokens.
    other = new Fleet({ url, fleetKey, cycleMs: 150, leaseMs: 600 });
    await other.scope('watch-node', {}).add(['RFID-A', 'RFID-B']);
    for (let i = 0; i < 100 && other.replicas()[0]?.owned !== 2; i++) await delay(50);
    assert.equal(other.replicas()[0]?.owned, 2, 'the other replica owns both tokens');

    // Typed in full: a ${NAME} (or a secret left to the environment) is used by Test connection only once deployed.
    await page.fill('#node-config-input-baseUrl', session.sim.baseUrl);
    await page.fill('#node-config-input-authUrl', session.sim.authUrl);
    await page.fill('#node-config-input-clientId', session.sim.options.clientId as string);
    await page.fill('#node-config-input-clientSecret', session.sim.options.clientSecret as string);
    await page.fill('#node-config-input-coordination', url);
    await page.fill('#node-config-input-fleetKey', fleetKey);
    const lines = await testRedis();
    assert.match(lines[0], new RegExp(`^Redis at redis://127\\.0\\.0\\.1:\\d+ answers; fleet ${fleetKey}: 1 live replica$`));
    assert.equal(lines.length, 2, lines.join('\n'));
    assert.match(lines[1], new RegExp(`, pid ${process.pid}: owns 2 watched tokens \\(${other.replicaId}\\)$`));
    assert.match(String(await page.textContent('#node-config-charging-test-result')), /Connected: token received/, 'the service result is still shown above');
    const dialog = String(await page.textContent('#red-ui-editor-stack'));
    assert.ok(!dialog.includes(PASSWORD) && !dialog.includes(encodeURIComponent(PASSWORD)), 'no password in the dialog text');
    await session.shot('dialog-service-fleet-test');

    await page.fill('#node-config-input-coordination', `redis://:wrong-pass-123@127.0.0.1:${(redis as RedisServer).port}`);
    const refused = await testRedis();
    assert.match(refused[0], /Redis refused the user name or password in the URL \(WRONGPASS\)/);
    assert.ok(!refused.join(' ').includes('wrong-pass-123'));
    await page.fill('#node-config-input-coordination', url);
  });

  it('the dialog says the URL forms; a redis-sentinel:// URL typed is accepted, and Test connection names the primary and the sentinels that answered', async function () {
    requireRedis(this);
    const forms = String(await page.textContent('#node-config-coordination-forms'));
    assert.match(forms, /redis-sentinel:\/\/\[:password@\]host1:26379,host2:26379,host3:26379\/<primary name>/);
    assert.match(forms, /sentinelPassword=/);
    assert.equal(await marked('coordination', 'redis-sentinel://:pw@10.0.0.1:26379,10.0.0.2:26379,10.0.0.3:26379/mymaster'), false, 'Sentinel URL: cleared');
    assert.equal(await marked('coordination', 'rediss-sentinel://s1,s2,s3/mymaster?sentinelPassword=x'), false, 'TLS Sentinel URL: cleared');
    assert.equal(await marked('coordination', 'redis-sentinel://10.0.0.1:26379,10.0.0.2:26379'), true, 'no primary name: marked');
    const sentinel = await RedisSentinel.start({ password: PASSWORD, sentinelPassword: 'br0wser-Sentinel-pa55' });
    try {
      await page.fill('#node-config-input-coordination', sentinel.url());
      const lines = await testRedis();
      assert.match(lines[0], new RegExp(`^Redis at redis-sentinel://127\\.0\\.0\\.1:\\d+,127\\.0\\.0\\.1:\\d+,127\\.0\\.0\\.1:\\d+/${PRIMARY_NAME} answers: primary ${PRIMARY_NAME} at 127\\.0\\.0\\.1:${sentinel.currentPrimary} \\(3 of 3 sentinels answered; 1 healthy replica\\); fleet ${fleetKey}: no live replica`), lines.join('\n'));
      await page.fill('#node-config-input-coordination', sentinel.url({ name: 'nosuchprimary' }));
      const unknown = await testRedis();
      assert.match(unknown[0], /no sentinel knows a primary named nosuchprimary/);
      const dialog = String(await page.textContent('#red-ui-editor-stack'));
      for (const secret of [PASSWORD, encodeURIComponent(PASSWORD), 'br0wser-Sentinel-pa55']) assert.ok(!dialog.includes(secret), 'no password in the dialog text');
      await session.shot('dialog-service-fleet-sentinel');
    } finally {
      await sentinel.close();
      await page.fill('#node-config-input-coordination', (redis as RedisServer).url);
    }
  });

  it('after a deploy the stored URL comes back masked, is not marked, and Test connection uses it: the deployed Node-RED is a replica too', async function () {
    requireRedis(this);
    await page.click('#node-config-dialog-ok');
    await page.waitForSelector('#node-config-input-baseUrl', { state: 'detached' });
    await page.click('#node-dialog-ok');
    await page.click('#red-ui-header-button-deploy');
    await delay(1500);
    const svcId = await page.evaluate(() => (window as unknown as AnyRed).RED.nodes.node('fleet-start').service as string);
    const creds = await page.evaluate(async (id) => (await fetch(`credentials/charging-service/${id}`)).json(), svcId);
    assert.equal(creds.has_coordination, true, JSON.stringify(creds));
    assert.equal(creds.coordination, undefined, 'the editor never receives the URL');
    await page.evaluate((id) => (window as unknown as AnyRed).RED.editor.editConfig('', 'charging-service', id), svcId);
    await page.waitForSelector('#node-config-input-coordination');
    await delay(500);
    assert.equal(await page.$eval('#node-config-input-coordination', (e) => (e as HTMLInputElement).value), '__PWRD__');
    assert.equal(await page.$eval('#node-config-input-coordination', (e) => e.classList.contains('input-error')), false, 'the stored placeholder is not marked');
    const lines = await testRedis();
    assert.match(lines[0], /answers; fleet .*: 2 live replicas$/, lines.join('\n'));
    assert.equal(lines.length, 3, lines.join('\n'));
    assert.ok(lines.some((l) => / owns 0 watched tokens /.test(l) && !l.includes(String(process.pid))), 'the deployed Node-RED process, owning nothing');
    assert.ok(!session.log().includes(PASSWORD), 'not in Node-RED\'s log');
    await page.click('#node-config-dialog-cancel');
  });
});
