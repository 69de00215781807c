/**
 * Redis Sentinel at its edges, against real processes (test/redis-sentinel.ts):
 * nothing left behind by a closed connection, a minority of sentinels that
 * refuses the credentials or names garbage does not outvote the majority,
 * a +switch-master heard while connecting, and URLs written by hand
 * (percent-encoding, IPv6, '+' in a password) read as a person means them.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { FleetConnection } from '../../../nodes/lib/fleet/redis/connection';
import { Script } from '../../../nodes/lib/fleet/redis/script';
import { parseRedisUrl, type SentinelTarget } from '../../../nodes/lib/fleet/redis/url';
import { ChargingError } from '../../../nodes/lib/errors';
import { RedisSentinel } from '../../redis-sentinel';
import { RedisServer, requireRedis } from '../../redis-server';
import { delay, freePort, rejection, until } from '../../harness';

const PASSWORD = 'Data-Pa55:word@x';
const SENTINEL_PASSWORD = 'Sentinel-Pa55word-9';
const MARK = new Script({ name: 'testMark', durable: true, keys: ['key'], args: ['value'], lua: `redis.call('SET', K.key, A.value) return 1` });

/** Connections a server holds under a client name (CLIENT LIST). */
async function named(s: RedisSentinel, port: number, sentinel: boolean, name: string): Promise<number> {
  const proc = (sentinel ? s.sentinels : s.nodes).find((p) => p.port === port);
  if (!proc) throw new Error(`no process on ${port}`);
  const c = sentinel ? s.sentinel(proc) : s.admin(port);
  try {
    const list = String(await c.call('CLIENT', 'LIST'));
    return list.split('\n').filter((l) => l.includes(`name=${name} `)).length;
  } finally {
    c.disconnect();
  }
}

const tcpHandles = () => process.getActiveResourcesInfo().filter((r) => r === 'TCPWrap' || r === 'TLSWrap').length;

describe('fleet: Redis Sentinel at its edges (real primary, replica and three sentinels)', function () {
  this.timeout(120_000);
  let s: RedisSentinel;
  const open: Array<{ close(): Promise<void> }> = [];
  const connect = (url: string) => {
    const c = new FleetConnection({ url, connectTimeoutMs: 1_500, commandTimeoutMs: 1_000, name: 'edge-data' });
    open.push(c);
    return c;
  };

  before(async function () {
    requireRedis(this);
    s = await RedisSentinel.start({ password: PASSWORD, sentinelPassword: SENTINEL_PASSWORD });
  });
  afterEach(async () => {
    for (const c of open.splice(0)) await c.close();
  });
  after(async () => s?.close());

  it('opened and closed 200 times (half of them closed while connecting): no socket, sentinel or data connection left', async () => {
    const before = tcpHandles();
    for (let i = 0; i < 200; i++) {
      const c = new FleetConnection({ url: s.url(), connectTimeoutMs: 1_500, commandTimeoutMs: 1_000, name: 'edge-cycle' });
      if (i % 2 === 0) await c.open();
      else void c.open().catch(() => undefined);
      await c.close();
    }
    await delay(1_000);
    const left = tcpHandles() - before;
    const onSentinels = await Promise.all(s.sentinels.map((x) => named(s, x.port, true, 'chargectl-sentinel-watch')));
    const onPrimary = await named(s, s.currentPrimary, false, 'edge-cycle');
    assert.deepEqual({ left, onSentinels, onPrimary }, { left: 0, onSentinels: [0, 0, 0], onPrimary: 0 });
  });

  it('closed while a durable write waits for the sentinels: no sentinel connection is opened after close()', async () => {
    for (let i = 0; i < 20; i++) {
      const c = new FleetConnection({ url: s.url(), connectTimeoutMs: 1_500, commandTimeoutMs: 1_000, name: 'edge-close' });
      await c.open();
      // No healthy replica known: the write is confirmed by asking the sentinels, and close() lands while it is.
      (c.primary as { replicas: number }).replicas = 0;
      const write = c.eval(MARK.call({ key: `edge:close:${i}` }, { value: '1' })).catch(() => undefined);
      await delay(i % 5);
      await c.close();
      await write;
    }
    await delay(1_000);
    const onSentinels = await Promise.all(s.sentinels.map((x) => named(s, x.port, true, 'chargectl-sentinel-watch')));
    assert.deepEqual(onSentinels, [0, 0, 0]);
  });

  it('one sentinel frozen (SIGSTOP) while durable writes are confirmed by the sentinels: they go on, its questions do not pile up, and it is not waited for at every write', async () => {
    const c = connect(s.url());
    await c.open();
    const frozen = s.sentinels[2];
    frozen.proc?.kill('SIGSTOP');
    try {
      const started = performance.now();
      for (let i = 0; i < 12; i++) {
        (c.primary as { replicas: number }).replicas = 0; // confirmed by the sentinels, the frozen one among them
        assert.equal(await c.eval(MARK.call({ key: `edge:frozen:${i}` }, { value: '1' })), 1);
      }
      // Its timeout (1 s here) waited out once per SILENT_MS at most, not at every write.
      const tookMs = performance.now() - started;
      assert.ok(tookMs < 4_000, `12 durable writes took ${Math.round(tookMs)} ms with one sentinel frozen`);
      const kept = (c.sentinels as unknown as { clients: Map<string, { commandQueue: { length: number } }> }).clients.get(`127.0.0.1:${frozen.port}`);
      assert.ok((kept?.commandQueue.length ?? 0) <= 4, `${kept?.commandQueue.length} questions queued for the frozen sentinel`);
    } finally {
      frozen.proc?.kill('SIGCONT');
    }
  });

  it('one sentinel of three refusing the sentinel password: the two that agree are a majority, and the connection is made', async () => {
    const other = await RedisServer.start({ password: 'Another-Pa55word-7', persist: false });
    try {
      const c = connect(s.url({ sentinels: [s.sentinels[0].port, s.sentinels[1].port, other.port] }));
      assert.equal(await c.run('ping', (r) => r.ping()), 'PONG');
      assert.equal(c.primary?.primary.port, s.currentPrimary);
      // With no majority, the refusal is what is said (a CONFIG error: waiting does not help).
      const dead = await freePort();
      const c2 = connect(s.url({ sentinels: [s.sentinels[0].port, other.port, dead] }));
      const err = await rejection(c2.open());
      assert.equal(err.code, 'CONFIG', err.message);
      assert.match(err.message, /refused the sentinel password/);
    } finally {
      await other.close();
    }
  });

  it("a wrong or missing data password is told apart from the sentinels' (which password, and where it goes), with no password in it", async () => {
    const wrong = s.url().replace(encodeURIComponent(PASSWORD), 'Wrong-Data-Pa55');
    const none = s.url().replace(`:${encodeURIComponent(PASSWORD)}@`, '');
    const said: string[] = [];
    for (const [url, cause, words] of [
      [wrong, 'WRONGPASS', /primary refused the data nodes' user name or password \(the one before the hosts; the sentinels accepted theirs\)/],
      [none, 'NOAUTH', /primary needs the data nodes' password: put it before the hosts \(redis-sentinel:\/\/:password@/],
    ] as const) {
      const err = await rejection(connect(url).open());
      assert.equal(err.code, 'CONFIG', err.message);
      assert.equal(err.causeCode, cause, err.message);
      assert.match(err.message, words);
      said.push(err.message);
    }
    const sentinelRefused = await rejection(connect(s.url({ sentinelPassword: 'Wrong-Sentinel-Pa55' })).open());
    assert.equal(sentinelRefused.causeCode, 'SENTINEL_AUTH');
    for (const text of [...said, sentinelRefused.message]) for (const secret of [PASSWORD, SENTINEL_PASSWORD, 'Wrong-Data-Pa55', 'Wrong-Sentinel-Pa55']) assert.ok(!text.includes(secret), text);
  });

  it('one sentinel listed under two names (127.0.0.1 and localhost) has one vote: with the third away, no majority', async () => {
    const dead = await freePort();
    const p0 = s.sentinels[0].port;
    const url = s.url({ sentinels: [p0, dead] }).replace(`,127.0.0.1:${dead}`, `,localhost:${p0},127.0.0.1:${dead}`);
    const err = await rejection(connect(url).open());
    assert.equal(err.causeCode, 'SENTINELS_UNREACHABLE', err.message);
    assert.match(err.message, new RegExp(`localhost:${p0}: the same sentinel as 127\\.0\\.0\\.1:${p0}`));
    // Three distinct sentinels, one of them under its other name: a majority still.
    const c = connect(s.url({ sentinels: [p0, s.sentinels[1].port] }).replace(`:${s.sentinels[1].port}`, `:${s.sentinels[1].port},localhost:${s.sentinels[2].port}`));
    assert.equal(await c.run('ping', (r) => r.ping()), 'PONG');
    assert.equal(c.primary?.answered, 3);
  });

  it('a sentinel answering with an address that is no address (a 64 KiB host, port 0): not a vote, and not repeated whole in the error', async () => {
    const liar = await lyingSentinel('h'.repeat(65_536), '0');
    const dead = await freePort();
    try {
      const c = connect(s.url({ sentinels: [s.sentinels[0].port, liar.port, dead] }));
      const err = await rejection(c.open());
      assert.ok(err.message.length < 2_000, `an error of ${err.message.length} characters`);
      assert.match(err.message, /unreadable/);
      // Two liars naming the same garbage are no majority either: nothing connects to it.
      const liar2 = await lyingSentinel('h'.repeat(65_536), '0');
      try {
        const c2 = connect(s.url({ sentinels: [s.sentinels[0].port, liar.port, liar2.port] }));
        const err2 = await rejection(c2.open());
        assert.equal(err2.causeCode, 'SENTINELS_UNREACHABLE', err2.message);
      } finally {
        liar2.close();
      }
    } finally {
      liar.close();
    }
  });

  it('a majority naming a primary that cannot be reached: the error names that address, and nothing else connects', async () => {
    const dead = await freePort();
    const liars = [await lyingSentinel('127.0.0.1', String(dead)), await lyingSentinel('127.0.0.1', String(dead))];
    try {
      const c = connect(s.url({ sentinels: [s.sentinels[0].port, ...liars.map((l) => l.port)] }));
      const err = await rejection(c.open());
      assert.equal(err.code, 'NETWORK', err.message);
      assert.match(err.message, new RegExp(`the primary the sentinels name, 127\\.0\\.0\\.1:${dead}: could not reach Redis \\(ECONNREFUSED\\)`));
      assert.equal(c.health.up, false);
      assert.equal(c.primary?.primary.port, dead, 'the majority is followed: the real sentinel alone does not decide');
    } finally {
      for (const l of liars) l.close();
    }
  });

  /** The sentinels' answer is taken, then SENTINEL FAILOVER runs before the connection to that (old) primary is made. */
  const failoverAfterAsking = (c: FleetConnection) => {
    const sentinels = c.sentinels as unknown as { primary(): Promise<unknown> };
    const ask = sentinels.primary.bind(sentinels);
    const state = { armed: true, from: 0, to: 0 };
    sentinels.primary = async () => {
      const found = await ask();
      if (state.armed) {
        state.armed = false;
        Object.assign(state, await s.failover());
      }
      return found;
    };
    return state;
  };

  it('+switch-master heard while connecting (the sentinels asked just before): the connection goes on to the new primary at once', async () => {
    const c = connect(s.url());
    await c.open();
    await delay(300); // subscribed to +switch-master
    const fo = failoverAfterAsking(c);
    const admin = s.admin(s.currentPrimary);
    await admin.call('CLIENT', 'KILL', 'TYPE', 'normal'); // drops our connection: the next one asks the sentinels
    await until(() => fo.to !== 0, 'the failover', 40_000);
    // The old primary is demoted some seconds after SENTINEL FAILOVER: until then it would keep our writes.
    await until(() => c.primary?.primary.port === fo.to && c.health.up, `the connection on the new primary (was ${fo.from})`, 3_000);
    await s.settle();
  });

  it('+switch-master heard during the very first connection: the same', async () => {
    const c = connect(s.url());
    const fo = failoverAfterAsking(c);
    await c.open().catch(() => undefined); // it may be refused (the ready check of a demoted primary) and made again
    await until(() => fo.to !== 0, 'the failover', 40_000);
    await until(() => c.primary?.primary.port === fo.to && c.health.up, `the connection on the new primary (was ${fo.from})`, 3_000);
    await s.settle();
  });

  it('a failover: each sentinel announces it (three +switch-master, seconds apart), and the connection moves once', async () => {
    const c = connect(s.url());
    await c.open();
    await delay(300);
    const redis = (c as unknown as { redis: { on(e: string, f: () => void): void } }).redis;
    let drops = 0;
    redis.on('close', () => drops++);
    const fo = await s.failover();
    await until(() => c.primary?.primary.port === fo.to && c.health.up, 'the connection on the new primary', 5_000);
    // The other sentinels learn the switch from the first one's hello messages (every 2 s) and announce it in turn.
    await delay(4_500);
    assert.equal(drops, 1, 'dropped again by the later announcements of the same switch');
    await s.settle();
  });

  describe('URLs written by hand', () => {
    it('a redis:// password that is not properly %-encoded: a CONFIG error naming the field, not a URIError', () => {
      assert.throws(
        () => parseRedisUrl('redis://:s3cret%ZZ@h1:6379'),
        (e: unknown) => e instanceof ChargingError && e.code === 'CONFIG' && /%-encoded/.test(e.message) && !e.message.includes('s3cret'),
      );
    });

    it("a '+' in sentinelPassword is a '+' (as in the data password before the hosts), %2B too", () => {
      const t = parseRedisUrl('redis-sentinel://:a+b@h1,h2,h3/m?sentinelPassword=c+d%2Be') as SentinelTarget;
      assert.equal(t.password, 'a+b');
      assert.equal(t.sentinelPassword, 'c+d+e');
    });

    it('one IPv6 sentinel written twice ([::1] and [0:0:0:0:0:0:0:1]) is refused: it would vote twice', () => {
      assert.throws(() => parseRedisUrl('redis-sentinel://[::1],[0:0:0:0:0:0:0:1],h3/m'), /lists \[::1\]:26379 twice/);
      assert.throws(() => parseRedisUrl('redis-sentinel://[:::::],h3/m'), /\[IPv6\] address/);
      assert.throws(() => parseRedisUrl(`redis-sentinel://${'a'.repeat(300)},h2/m`), (e: unknown) => e instanceof ChargingError && e.message.length < 400);
      const t = parseRedisUrl('redis-sentinel://[0:0::1]:26380,[FE80::A],h3/m') as SentinelTarget;
      assert.deepEqual(
        t.sentinels.map((x) => x.host),
        ['::1', 'fe80::a', 'h3'],
      );
    });

    it('a raw / ? or # in the data password: the error says it must be %-encoded, and shows no part of it', () => {
      for (const pw of ['Xq/Zw-S3cret', 'Xq?Zw-S3cret', 'Xq#Zw-S3cret']) {
        assert.throws(
          () => parseRedisUrl(`redis-sentinel://:${pw}@h1,h2,h3/m`),
          (e: unknown) => e instanceof ChargingError && e.code === 'CONFIG' && /must be %-encoded \(%2F %3F %23 %40\)/.test(e.message) && !/Xq|Zw|S3cret/.test(e.message),
          pw,
        );
      }
    });

    it('an unknown query word is named only when it is a plain word (a misplaced password is not repeated)', () => {
      assert.throws(() => parseRedisUrl('redis-sentinel://h1/m?sentinelpasword=x'), /not sentinelpasword/);
      assert.throws(
        () => parseRedisUrl('redis-sentinel://h1/m?S3cret-Pa55%21'),
        (e: unknown) => e instanceof ChargingError && e.code === 'CONFIG' && !/S3cret|Pa55/.test(e.message),
      );
    });
  });
});

/** A sentinel that lies (a hostile or broken one): names `host`:`port` for any primary, +OK to anything else. */
async function lyingSentinel(host: string, port: string): Promise<{ port: number; close(): void }> {
  const bulk = (x: string) => `$${Buffer.byteLength(x)}\r\n${x}\r\n`;
  const server = net.createServer((sock) => {
    sock.on('error', () => undefined);
    sock.on('data', (d) => {
      // One answer per command (ioredis sends AUTH, CLIENT SETNAME, then the three questions).
      for (const cmd of d.toString().split(/\*\d+\r\n/).slice(1)) {
        const words = cmd.split('\r\n').filter((_, i) => i % 2 === 1).map((w) => w.toUpperCase());
        if (words[0] === 'SENTINEL' && words[1] === 'GET-MASTER-ADDR-BY-NAME') sock.write(`*2\r\n${bulk(host)}${bulk(port)}`);
        else if (words[0] === 'SENTINEL' && words[1] === 'MASTER') sock.write(`*2\r\n${bulk('flags')}${bulk('master')}`);
        else if (words[0] === 'SENTINEL' && words[1] === 'REPLICAS') sock.write('*0\r\n');
        else sock.write('+OK\r\n');
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return { port: (server.address() as net.AddressInfo).port, close: () => server.close() };
}
