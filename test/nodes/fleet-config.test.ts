/**
 * *Coordinate replicas* in the charging-service configuration, through the
 * real Node-RED runtime: the dialog's rules equal the runtime's, a bad Redis
 * URL or fleet key is a CONFIG error with no password in it, and Test
 * connection checks Redis (a real, password-protected redis-server): it lists
 * the fleet's live replicas with the tokens each owns, never joins the fleet,
 * and says why a wrong or missing password is refused without showing it.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import vm from 'node:vm';
import { Fleet } from '../../nodes/lib/fleet/fleet';
import { FLEET_KEY_PATTERN, FleetKeys } from '../../nodes/lib/fleet/redis/keys';
import { fleetSettings } from '../../nodes/common/service-options';
import type { ChargingServiceNode } from '../../nodes/common/service-node';
import { helper, load, send, Sink, CLIENT_ID, CLIENT_SECRET, loggedText, assertNoSecret, runtimeSuite, freePort, until, delay } from '../harness';
import { RedisServer, requireRedis } from '../redis-server';
import type { RedisCoordination } from '../../nodes/lib/fleet/coordination';

const PASSWORD = 'redis-Fl33t:pa55/with@odd%chars';
const PROGRESS = { id: 'progress', type: 'charging-progress', service: 'svc', wires: [['out']] };
const SINKS = [{ id: 'out', type: 'helper' }, { id: 'caught', type: 'helper' }];
const CATCH = { id: 'catcher', type: 'catch', scope: null, uncaught: false, wires: [['caught']] };
const creds = (coordination: string) => ({ svc: { clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, coordination } });

type Validator = (v: unknown, opt: object) => true | string;
interface Definition {
  defaults: Record<string, { value?: unknown; type?: string; required?: boolean; validate?: Validator }>;
  credentials: Record<string, { type: string; validate?: Validator }>;
}

/** The registerType definition as the editor gets it: the dialog's script run in a vm with a stand-in RED. */
function editorDefinition(): Definition {
  const html = fs.readFileSync(path.join(__dirname, '..', '..', '..', 'nodes', 'charging-service.html'), 'utf8');
  const script = /<script type="text\/javascript">([\s\S]*?)<\/script>/.exec(html)?.[1] ?? '';
  let def: Definition | null = null;
  const stub = () => () => true;
  const sandbox = { RED: { _: (key: string) => key, nodes: { registerType: (_t: string, d: Definition) => (def = d) } }, ChargingEditor: { urlValidator: stub, rangeValidator: stub } };
  vm.runInNewContext(script, sandbox);
  assert.ok(def, 'the dialog registers charging-service');
  return def;
}

/** What the runtime says of a configuration with this URL and fleet key: null when it accepts them, else its CONFIG message. */
function runtimeRefuses(coordination: string, fleetKey: string): string | null {
  const options = { baseUrl: 'https://api.example.com', authUrl: 'https://auth.example.com', clientId: 'c', clientSecret: 's' };
  const RED = { settings: {}, nodes: { getNode: () => null } } as unknown as Parameters<typeof fleetSettings>[0];
  try {
    fleetSettings(RED, { fleetKey }, { coordination }, options, { REDIS_URL: 'redis://r:6379' });
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}

describe('charging-service: Coordinate replicas settings and Test connection', function () {
  this.timeout(20_000);
  const rt = runtimeSuite();
  const test = (body: Record<string, unknown>) => helper.request().post('/charging-service/test').send({ baseUrl: rt.sim.baseUrl, authUrl: rt.sim.authUrl, clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, ...body }).expect(200);

  it('the dialog declares coordination a password credential, fleetKey and fleetTls as defaults, and accepts what the runtime accepts', () => {
    const def = editorDefinition();
    assert.equal(def.credentials.coordination.type, 'password');
    assert.deepEqual({ ...def.defaults.fleetTls }, { value: '', type: 'tls-config', required: false });
    assert.equal(def.defaults.fleetKey.value, '');
    const keyOk = (k: string) => def.defaults.fleetKey.validate?.(k, {}) === true;
    const urlOk = (u: string) => def.credentials.coordination.validate?.(u, {}) === true;
    for (const key of ['', 'site-a', 'a.b_c:d-1', 'x'.repeat(64), 'x'.repeat(65), 'has{braces}', 'has space', 'ü']) {
      assert.equal(keyOk(key), FLEET_KEY_PATTERN.test(key) || key === '', `fleet key "${key}"`);
      assert.equal(keyOk(key), runtimeRefuses('redis://r:6379', key) === null, `fleet key "${key}": dialog and runtime agree`);
    }
    const sentinelUrls = ['redis-sentinel://:pw@s1:26379,s2:26379,s3:26379/mymaster', 'rediss-sentinel://s1,s2,s3/mymaster?db=1&sentinelPassword=x', 'redis-sentinel://s1:26379,s2:26379', 'redis-sentinel:///mymaster', 'redis-sentinel://s1/my master'];
    for (const url of ['', 'redis://redis:6379', 'rediss://:pw@redis.example:6380/2', 'REDIS://r', '${REDIS_URL}', 'http://redis:6379', 'redis:/r', 'redis://', 'redis-host:6379', ...sentinelUrls]) {
      assert.equal(urlOk(url), runtimeRefuses(url, '') === null, `URL "${url}": dialog and runtime agree`);
    }
    assert.equal(urlOk('__PWRD__'), true, 'the stored password placeholder is not marked');
    assert.match(String(def.defaults.fleetKey.validate?.('has{braces}', {})), /errors\.fleetKey$/);
    assert.match(String(def.credentials.coordination.validate?.('http://x', {})), /errors\.coordination$/);
  });

  it('the runtime declares coordination a password credential', async () => {
    await load(rt.sim, [PROGRESS, ...SINKS]);
    const redNodes = (helper as unknown as { _redNodes: { getCredentialDefinition(type: string): Record<string, { type: string }> } })._redNodes;
    assert.deepEqual(redNodes.getCredentialDefinition('charging-service').coordination, { type: 'password' });
  });

  for (const [what, url, expected] of [
    ['not redis://', `http://:${encodeURIComponent(PASSWORD)}@127.0.0.1:6379`, /must start with redis:\/\/, rediss:\/\/, redis-sentinel:\/\/ or rediss-sentinel:\/\//],
    ['a Sentinel URL without the primary name', `redis-sentinel://:${encodeURIComponent(PASSWORD)}@127.0.0.1:26379,127.0.0.1:26380`, /must name the primary after the hosts/],
    ['a Sentinel URL with an unknown query key', `redis-sentinel://:${encodeURIComponent(PASSWORD)}@127.0.0.1:26379/m?password=${encodeURIComponent(PASSWORD)}`, /takes db, sentinelPassword and sentinelUsername in its query, not password/],
    ['a database that is not a number', `redis://:${encodeURIComponent(PASSWORD)}@127.0.0.1:6379/x`, /database in the Redis URL must be a number/],
  ] as const) {
    it(`a Redis URL with ${what} is a CONFIG error in the log and at Catch, without the password, and nothing is sent`, async () => {
      await load(rt.sim, [PROGRESS, ...SINKS, CATCH], {}, creds(url));
      send('progress', { payload: { token: 'T' } });
      const caught = await Sink.of('caught').next();
      const error = caught.error as { code: string; message: string };
      assert.equal(error.code, 'CONFIG');
      assert.match(error.message, expected);
      assert.match(loggedText(), expected);
      assertNoSecret(`${loggedText()} ${JSON.stringify(caught)}`, [PASSWORD, encodeURIComponent(PASSWORD)], 'the log or the error');
      assert.equal(rt.sim.requests.length, 0);
    });
  }

  it('a fleet key with braces is a CONFIG error naming the fleet key', async () => {
    await load(rt.sim, [PROGRESS, ...SINKS, CATCH], { fleetKey: 'a{b}' }, creds('redis://127.0.0.1:6379'));
    send('progress', { payload: { token: 'T' } });
    const caught = await Sink.of('caught').next();
    assert.match((caught.error as { message: string }).message, /^Fleet key: use 1 to 64 letters/);
  });

  it('Test connection: a typed URL that is not redis:// gets its own answer beside the service\'s, without the password', async () => {
    await load(rt.sim, [PROGRESS, ...SINKS]);
    const res = await test({ coordination: `http://:${PASSWORD}@127.0.0.1:6379` });
    assert.equal(res.body.ok, true, 'the service part is unaffected');
    assert.equal(res.body.redis.ok, false);
    assert.match(res.body.redis.message, /must start with redis:\/\/, rediss:\/\/, redis-sentinel:\/\/ or rediss-sentinel:\/\//);
    assertNoSecret(res.text, [PASSWORD, encodeURIComponent(PASSWORD)], 'the answer');
  });

  it('Test connection: nothing listening at a typed URL gets the one answer every network failure of a typed URL gets (no port scanner)', async () => {
    await load(rt.sim, [PROGRESS, ...SINKS]);
    const port = await freePort();
    const res = await test({ coordination: `redis://:${encodeURIComponent(PASSWORD)}@127.0.0.1:${port}` });
    assert.equal(res.body.redis.ok, false);
    assert.match(res.body.redis.message, /no Redis answered at the URL typed in the dialog/);
    assert.doesNotMatch(res.body.redis.message, /ECONNREFUSED/);
    assertNoSecret(res.text, [PASSWORD, encodeURIComponent(PASSWORD)], 'the answer');
  });

  it('Test connection without a Redis URL answers as before (no redis part)', async () => {
    await load(rt.sim, [PROGRESS, ...SINKS]);
    const res = await test({ coordination: '' });
    assert.equal(res.body.ok, true);
    assert.equal(res.body.redis, undefined);
  });

  describe('with a password-protected Redis', () => {
    let redis: RedisServer;
    const fleets: Fleet[] = [];
    before(async function () {
      requireRedis(this);
      redis = await RedisServer.start({ password: PASSWORD, persist: false });
    });
    after(async () => {
      await redis?.close();
    });
    afterEach(async () => {
      await Promise.all(fleets.splice(0).map((f) => f.close()));
    });

    it('lists the live replicas of the deployed fleet with the tokens each owns, from the stored URL, and does not join the fleet', async () => {
      const fleetKey = `fc-${process.pid}-1`;
      await load(rt.sim, [PROGRESS, ...SINKS], { fleetKey }, creds(redis.url));
      const deployed = ((helper.getNode('svc') as unknown as ChargingServiceNode).getCoordination() as RedisCoordination).fleet;
      assert.ok(deployed, 'the configuration opened its fleet');
      // A second replica in this process, watching three tokens (a watch node elsewhere).
      const other = new Fleet({ url: redis.url, fleetKey, cycleMs: 150, leaseMs: 600 });
      fleets.push(other);
      await other.scope('watch-node', {}).add(['RFID-1', 'RFID-2', 'RFID-3']);
      await until(() => other.replicas().find((r) => r.id === other.replicaId)?.owned === 3 && other.replicas().some((r) => r.id === deployed.replicaId), 'both replicas live, the second owning 3 tokens', 10_000);

      const res = await test({ id: 'svc', clientSecret: '__PWRD__', coordination: '__PWRD__', fleetKey });
      assert.equal(res.body.ok, true, res.body.message);
      const r = res.body.redis as { ok: boolean; message: string; fleetKey: string; replicas: Array<{ id: string; host: string; pid: number; owned: number }> };
      assert.equal(r.ok, true, r.message);
      assert.equal(r.fleetKey, fleetKey);
      assert.match(r.message, new RegExp(`^Redis at redis://127\\.0\\.0\\.1:${redis.port} answers; fleet ${fleetKey}: 2 live replicas$`));
      const byId = new Map(r.replicas.map((x) => [x.id, x]));
      assert.deepEqual([...byId.keys()].sort(), [deployed.replicaId, other.replicaId].sort());
      assert.equal(byId.get(other.replicaId)?.owned, 3);
      assert.equal(byId.get(deployed.replicaId)?.owned, 0);
      assert.equal(byId.get(other.replicaId)?.pid, process.pid);
      assertNoSecret(res.text, [PASSWORD, encodeURIComponent(PASSWORD), CLIENT_SECRET], 'the answer');

      const admin = redis.admin();
      assert.deepEqual((await admin.zrange(new FleetKeys(fleetKey).replicas, '0', '-1')).sort(), [deployed.replicaId, other.replicaId].sort(), 'the test did not register as a replica');
      // The test's connection is dropped as the answer goes out; Redis notices the close a moment later.
      let clients = '';
      for (let i = 0; i < 50; i++) {
        clients = String(await admin.client('LIST'));
        if (!/name=chargectl-test-connection/.test(clients)) break;
        await delay(50);
      }
      assert.doesNotMatch(clients, /name=chargectl-test-connection/, 'the test closed its connection');
    });

    it('a typed URL with another fleet key: connected, no live replica', async () => {
      await load(rt.sim, [PROGRESS, ...SINKS]);
      const res = await test({ coordination: redis.url, fleetKey: `nobody-${process.pid}` });
      assert.equal(res.body.redis.ok, true, res.body.redis.message);
      assert.deepEqual(res.body.redis.replicas, []);
      assert.match(res.body.redis.message, /: no live replica/);
      assertNoSecret(res.text, [PASSWORD, encodeURIComponent(PASSWORD)], 'the answer');
    });

    it('Redis is checked even when the service is not (a stored secret is not sent to a token URL typed in the dialog)', async () => {
      await load(rt.sim, [PROGRESS, ...SINKS], {}, creds(redis.url));
      const res = await test({ id: 'svc', authUrl: 'https://elsewhere.example', clientSecret: '__PWRD__', coordination: '__PWRD__' });
      assert.equal(res.body.ok, false);
      assert.match(res.body.error, /Retype the client secret/);
      assert.equal(res.body.redis.ok, true, res.body.redis.message);
      assertNoSecret(res.text, [PASSWORD, encodeURIComponent(PASSWORD), CLIENT_SECRET], 'the answer');
    });

    it('a wrong password, or none: a clear message, and the password typed is nowhere in the answer', async () => {
      await load(rt.sim, [PROGRESS, ...SINKS]);
      const wrong = 'Wr0ng-Redis-Pa55word';
      const res = await test({ coordination: `redis://:${wrong}@127.0.0.1:${redis.port}` });
      assert.equal(res.body.ok, true, 'the service part is unaffected');
      assert.equal(res.body.redis.ok, false);
      assert.match(res.body.redis.message, /Redis refused the user name or password in the URL \(WRONGPASS\)/);
      assertNoSecret(res.text, [wrong, PASSWORD], 'the answer');
      const none = await test({ coordination: `redis://127.0.0.1:${redis.port}` });
      assert.equal(none.body.redis.ok, false);
      assert.match(none.body.redis.message, /Redis needs a password: put it in the URL/);
    });

    it('a Redis that accepts connections but never answers: the answer still comes, bounded by the connect timeout (3 s)', async () => {
      await load(rt.sim, [PROGRESS, ...SINKS]);
      redis.freeze();
      try {
        const started = Date.now();
        const res = await test({ coordination: redis.url });
        const took = Date.now() - started;
        assert.equal(res.body.ok, true, 'the service part is unaffected');
        assert.equal(res.body.redis.ok, false);
        assert.match(res.body.redis.message, /no Redis answered at the URL typed in the dialog/);
        // Generous: the bound is about 3 s; a dialog must not wait on a hung Redis for as long as the test's timeout.
        assert.ok(took < 12_000, `answered after ${took} ms`);
        assertNoSecret(res.text, [PASSWORD, encodeURIComponent(PASSWORD)], 'the answer');
      } finally {
        redis.thaw();
      }
    });
  });
});
