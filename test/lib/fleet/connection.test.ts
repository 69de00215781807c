/**
 * The Redis connection of the coordination against a real redis-server: URL
 * rules, the fleet key, clear errors with no password in them (wrong
 * password, no password, unreachable, TLS with an unknown CA), and health
 * told once per change when Redis stops and comes back.
 */
import assert from 'node:assert/strict';
import { FleetConnection } from '../../../nodes/lib/fleet/redis/connection';
import { parseRedisUrl } from '../../../nodes/lib/fleet/redis/url';
import { fleetKeyFor, FleetKeys } from '../../../nodes/lib/fleet/redis/keys';
import type { FleetHealth } from '../../../nodes/lib/fleet/redis/health';
import { ChargingError } from '../../../nodes/lib/errors';
import { RedisServer, requireRedis } from '../../redis-server';
import { testCerts } from '../client/tls-certs';
import { freePort, rejection, until } from '../../harness';

const PASSWORD = 'redis-Pa55:word/with@odd%chars';

describe('fleet: Redis connection (real redis-server)', function () {
  this.timeout(20_000);
  let redis: RedisServer;
  const open: FleetConnection[] = [];
  const connect = (url: string, extra: Partial<ConstructorParameters<typeof FleetConnection>[0]> = {}) => {
    const c = new FleetConnection({ url, connectTimeoutMs: 1_000, commandTimeoutMs: 500, ...extra });
    open.push(c);
    return c;
  };

  before(async function () {
    requireRedis(this);
    redis = await RedisServer.start({ password: PASSWORD });
  });
  after(async () => {
    for (const c of open) await c.close();
    await redis?.close();
  });

  describe('URL and fleet key', () => {
    it('reads redis:// and rediss:// URLs, and refuses anything else with a CONFIG error that shows no password', () => {
      const t = parseRedisUrl('rediss://user:s%40cret@redis.example.org:6380/2');
      assert.deepEqual({ ...t }, { kind: 'server', host: 'redis.example.org', port: 6380, db: 2, tls: true, username: 'user', password: 's@cret', where: 'rediss://redis.example.org:6380/2' });
      assert.equal((parseRedisUrl('redis://127.0.0.1') as { port: number }).port, 6379);
      for (const bad of ['http://:s3cretpass@host:6379', 'redis://:s3cretpass@host:6379/x', 'not a url s3cretpass', '']) {
        assert.throws(
          () => parseRedisUrl(bad),
          (e: unknown) => e instanceof ChargingError && e.code === 'CONFIG' && !e.message.includes('s3cretpass'),
          bad,
        );
      }
    });

    it('derives the fleet key from base URL, token URL and client ID only, and namespaces every key under it', () => {
      const id = { baseUrl: 'https://api.example.org/', tokenUrl: 'https://auth.example.org', clientId: 'client-1' };
      const key = fleetKeyFor(id);
      assert.match(key, /^f-[0-9a-f]{20}$/);
      assert.equal(fleetKeyFor({ ...id, baseUrl: 'https://api.example.org' }), key, 'a trailing slash is the same service');
      assert.notEqual(fleetKeyFor({ ...id, clientId: 'client-2' }), key);
      assert.notEqual(fleetKeyFor({ ...id, tokenUrl: 'https://other.example.org' }), key);
      assert.equal(fleetKeyFor(id, ' site-a '), 'site-a');
      assert.throws(() => fleetKeyFor(id, 'has{braces}'), (e: unknown) => e instanceof ChargingError && e.field === 'fleetKey');
      const keys = new FleetKeys(key);
      const names = [keys.token('abc'), keys.tokenLock('abc'), keys.budget, keys.replicas, keys.replicaInfo, keys.claim('abc'), keys.scope('n1').lease('RFID-1'), keys.scope('n1').state];
      for (const k of names) assert.ok(k.startsWith(`chargectl:{${key}}:`), k);
      assert.notEqual(keys.scope('n1').list, keys.scope('n2').list);
    });
  });

  describe('errors', () => {
    it('a wrong password gives a CONFIG error naming the server, with no password in it', async () => {
      const c = connect(redis.url.replace(encodeURIComponent(PASSWORD), 'wrong-Pa55word-xyz'));
      const err = await rejection(c.open());
      assert.equal(err.code, 'CONFIG');
      assert.match(err.message, /WRONGPASS/);
      assert.ok(err.message.includes(`127.0.0.1:${redis.port}`), err.message);
      assert.ok(!JSON.stringify(err.toJSON()).includes('wrong-Pa55word-xyz'));
      assert.equal(c.health.up, false);
    });

    it('no password where one is needed: CONFIG, saying to put it in the URL', async () => {
      const c = connect(`redis://127.0.0.1:${redis.port}`);
      const err = await rejection(c.run('ping', (r) => r.ping()));
      assert.equal(err.code, 'CONFIG');
      assert.match(err.message, /needs a password/);
    });

    it('an unreachable Redis gives a NETWORK error at once, with no password in it', async () => {
      const port = await freePort();
      const c = connect(`redis://:${encodeURIComponent(PASSWORD)}@127.0.0.1:${port}`);
      const err = await rejection(c.open());
      assert.equal(err.code, 'NETWORK');
      assert.match(err.message, /ECONNREFUSED/);
      for (const form of [PASSWORD, encodeURIComponent(PASSWORD)]) assert.ok(!err.message.includes(form), err.message);
      // Later calls fail fast too, rather than queue.
      const again = await rejection(c.run('ping', (r) => r.ping()));
      assert.equal(again.code, 'NETWORK');
    });

    it('the right password works, and every call after close() is CLOSED', async () => {
      const c = connect(redis.url);
      assert.equal(await c.run('ping', (r) => r.ping()), 'PONG');
      assert.equal(c.health.up, true);
      await c.close();
      assert.equal((await rejection(c.run('ping', (r) => r.ping()))).code, 'CLOSED');
    });
  });

  describe('TLS (rediss://)', () => {
    let tlsRedis: RedisServer;
    before(async () => {
      const certs = testCerts();
      tlsRedis = await RedisServer.start({ password: PASSWORD, tls: { cert: certs.serverCert, key: certs.serverKey, ca: certs.caCert } });
    });
    after(async () => tlsRedis?.close());

    it('connects with the private CA, and without it fails with a TLS error that says what to fix and shows no password', async () => {
      const good = connect(tlsRedis.url, { tls: { ca: testCerts().caCert } });
      assert.equal(await good.run('ping', (r) => r.ping()), 'PONG');
      const bad = connect(tlsRedis.url);
      const err = await rejection(bad.open());
      assert.equal(err.code, 'NETWORK');
      assert.match(err.message, /TLS handshake failed .*(CA|issuer|self-signed)/);
      assert.ok(!err.message.includes(PASSWORD) && !err.message.includes(encodeURIComponent(PASSWORD)));
    });
  });

  describe('health', () => {
    it('says down once when Redis stops and up once when it is back; calls meanwhile fail fast', async () => {
      const c = connect(redis.url);
      await c.open();
      const seen: FleetHealth[] = [];
      c.onHealth((h) => seen.push(h));
      await redis.stop();
      await until(() => seen.some((h) => !h.up), 'health down');
      const err = await rejection(c.run('ping', (r) => r.ping()));
      assert.ok(err.code === 'NETWORK' || err.code === 'TIMEOUT', err.message);
      await new Promise((r) => setTimeout(r, 700)); // several reconnection attempts fail meanwhile
      await redis.start();
      await until(() => seen.some((h) => h.up), 'health up again', 8_000);
      assert.equal(await c.run('ping', (r) => r.ping()), 'PONG');
      assert.deepEqual(
        seen.map((h) => h.up),
        [false, true],
        'one change each way',
      );
      assert.ok(seen[0].reason && !seen[0].reason.includes(PASSWORD));
    });

    it('a frozen Redis (no answers, socket open) turns health down through the command timeout', async () => {
      const c = connect(redis.url);
      await c.open();
      const seen: boolean[] = [];
      c.onHealth((h) => seen.push(h.up));
      redis.freeze();
      try {
        const err = await rejection(c.run('ping', (r) => r.ping()));
        assert.equal(err.code, 'TIMEOUT');
        assert.deepEqual(seen, [false]);
      } finally {
        redis.thaw();
      }
      assert.equal(await c.run('ping', (r) => r.ping()), 'PONG');
      assert.deepEqual(seen, [false, true]);
    });
  });
});
