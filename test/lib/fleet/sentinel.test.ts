/**
 * Coordination on Redis Sentinel against real processes (test/redis-sentinel.ts:
 * a primary, a replica, three sentinels): the URL, the primary a majority
 * names, clear errors with no password (unknown name, wrong sentinel
 * password, sentinels that disagree), the connection moved at a failover,
 * and what a demoted primary acknowledged: never taken as done (WAIT, then
 * the sentinels), and the states put back when another server answers.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { FleetConnection } from '../../../nodes/lib/fleet/redis/connection';
import { Script } from '../../../nodes/lib/fleet/redis/script';
import { parseRedisUrl, type SentinelTarget } from '../../../nodes/lib/fleet/redis/url';
import { Fleet } from '../../../nodes/lib/fleet/fleet';
import { ChargingError } from '../../../nodes/lib/errors';
import { checkRedis } from '../../../nodes/lib/fleet/redis-check';
import { RedisSentinel, PRIMARY_NAME } from '../../redis-sentinel';
import { requireRedis } from '../../redis-server';
import { delay, freePort, rejection, until } from '../../harness';

const PASSWORD = 'Data-Pa55:word@x';
const SENTINEL_PASSWORD = 'Sentinel-Pa55word-9';

/** A durable write of a key of its own (as a claim or a commit is): confirmed by WAIT or the sentinels before it counts. */
const MARK = new Script({ name: 'testMark', durable: true, keys: ['key'], args: ['value'], lua: `redis.call('SET', K.key, A.value) return 1` });

describe('fleet: Redis Sentinel (real primary, replica and three sentinels)', function () {
  this.timeout(60_000);
  let s: RedisSentinel;
  const open: Array<{ close(): Promise<void> }> = [];
  const connect = (url: string, extra: Partial<ConstructorParameters<typeof FleetConnection>[0]> = {}) => {
    const c = new FleetConnection({ url, connectTimeoutMs: 1_500, commandTimeoutMs: 1_000, ...extra });
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

  describe('URL', () => {
    it('reads redis-sentinel:// and rediss-sentinel:// with hosts, the primary name, db and the sentinels own password', () => {
      const t = parseRedisUrl('redis-sentinel://:p%40ss@10.0.0.1:26379,10.0.0.2,[::1]:26380/mymaster?db=2&sentinelPassword=s3nt') as SentinelTarget;
      assert.equal(t.kind, 'sentinel');
      assert.deepEqual(t.sentinels, [
        { host: '10.0.0.1', port: 26379 },
        { host: '10.0.0.2', port: 26379 },
        { host: '::1', port: 26380 },
      ]);
      assert.equal(t.name, 'mymaster');
      assert.equal(t.db, 2);
      assert.equal(t.password, 'p@ss');
      assert.equal(t.sentinelPassword, 's3nt');
      assert.equal(t.tls, false);
      assert.equal(t.where, 'redis-sentinel://10.0.0.1:26379,10.0.0.2:26379,[::1]:26380/mymaster?db=2');
      assert.equal((parseRedisUrl('rediss-sentinel://a,b,c/m') as SentinelTarget).tls, true);
    });

    it('refuses a malformed Sentinel URL with a CONFIG error that names what is wrong and shows no password', () => {
      const bad: Array<[string, RegExp]> = [
        ['redis-sentinel://:s3cretpass@h1:26379,h2:26379', /must name the primary/],
        ['redis-sentinel://:s3cretpass@/mymaster', /no sentinel host/],
        ['redis-sentinel://:s3cretpass@h1:99999/mymaster', /host or host:port/],
        ['redis-sentinel://:s3cretpass@h1,h1/mymaster', /twice/],
        ['redis-sentinel://:s3cretpass@h1/my master', /must name the primary/],
        ['redis-sentinel://:s3cretpass@h1/m?sentinelpassword=x', /not sentinelpassword/],
        ['redis-sentinel://:s3cretpass@h1/m?db=x', /database/],
        [`redis-sentinel://:s3cretpass@${Array.from({ length: 10 }, (_, i) => `h${i}`).join(',')}/m`, /at most 9/],
        ['redis-sentinel://:s3cret%ZZpass@h1/m', /%-encoded/],
        ['sentinel://:s3cretpass@h1/m', /must start with/],
      ];
      for (const [url, why] of bad) {
        assert.throws(
          () => parseRedisUrl(url),
          (e: unknown) => e instanceof ChargingError && e.code === 'CONFIG' && why.test(e.message) && !e.message.includes('s3cret'),
          url,
        );
      }
    });
  });

  describe('connecting', () => {
    it('connects to the primary a majority names, with the data and the sentinel passwords apart', async () => {
      const c = connect(s.url());
      assert.equal(await c.run('ping', (r) => r.ping()), 'PONG');
      assert.equal(c.primary?.primary.port, s.currentPrimary);
      assert.equal(c.primary?.answered, 3);
      assert.equal(c.primary?.replicas, 1);
      assert.equal(c.health.up, true);
    });

    it('Test connection names the primary and how many sentinels answered', async () => {
      const answer = await checkRedis({ url: s.url(), fleetKey: 'sentinel-check' }, true);
      assert.equal(answer.ok, true, answer.message);
      assert.match(answer.message, new RegExp(`primary ${PRIMARY_NAME} at 127\\.0\\.0\\.1:${s.currentPrimary}.*3 of 3 sentinels answered`));
      assert.ok(!answer.message.includes(PASSWORD) && !answer.message.includes(SENTINEL_PASSWORD));
    });

    it('an unknown primary name: a CONFIG error at once, in Test connection too, and nothing connects', async () => {
      const c = connect(s.url({ name: 'nosuchprimary' }));
      const err = await rejection(c.open());
      assert.equal(err.code, 'CONFIG');
      assert.match(err.message, /no sentinel knows a primary named nosuchprimary \(3 of 3 answered\)/);
      assert.equal(c.health.up, false);
      assert.match(c.health.reason ?? '', /nosuchprimary/);
      const answer = await checkRedis({ url: s.url({ name: 'nosuchprimary' }), fleetKey: 'k' }, false);
      assert.equal(answer.ok, false);
      assert.match(answer.message, /no sentinel knows a primary named nosuchprimary/);
    });

    it('a wrong or missing sentinel password: CONFIG, saying where it goes, with no password in it', async () => {
      for (const sentinelPassword of ['Wrong-Sentinel-Pa55', null]) {
        const c = connect(s.url({ sentinelPassword }));
        const err = await rejection(c.open());
        assert.equal(err.code, 'CONFIG', err.message);
        assert.match(err.message, /refused the sentinel password.*sentinelPassword=/);
        for (const secret of [PASSWORD, SENTINEL_PASSWORD, 'Wrong-Sentinel-Pa55']) assert.ok(!err.message.includes(secret), err.message);
      }
    });

    it('sentinels that disagree (no majority names one primary): a clear error, nothing connects, Test connection says it', async () => {
      const liar = await fakeSentinel('127.0.0.1', 1);
      const dead = await freePort();
      try {
        const url = s.url({ sentinels: [s.sentinels[0].port, liar.port, dead] });
        const c = connect(url);
        const err = await rejection(c.open());
        assert.equal(err.code, 'NETWORK');
        assert.match(err.message, /the sentinels disagree on the primary chargemain.*127\.0\.0\.1:1/);
        assert.equal(c.primary, null, 'connected to nothing');
        const answer = await checkRedis({ url, fleetKey: 'k' }, true);
        assert.equal(answer.ok, false);
        assert.match(answer.message, /disagree/);
        assert.ok(!answer.message.includes(PASSWORD) && !answer.message.includes(SENTINEL_PASSWORD));
        // Two of three agree: that is a majority, and the liar is outvoted.
        const c2 = connect(s.url({ sentinels: [s.sentinels[0].port, s.sentinels[1].port, liar.port] }));
        assert.equal(await c2.run('ping', (r) => r.ping()), 'PONG');
        assert.equal(c2.primary?.primary.port, s.currentPrimary);
      } finally {
        liar.close();
      }
    });
  });

  describe('failover', () => {
    it('SENTINEL FAILOVER under durable writes: the connection moves at +switch-master, and every write taken as done is on the new primary', async () => {
      const c = connect(s.url());
      const changes: number[] = [];
      c.onServerChange(() => changes.push(Date.now()));
      await c.open();
      await delay(300); // identified the first server
      const { done, stop } = writeLoop(c, 'a');
      await delay(300);
      const fo = await s.failover();
      await until(() => c.primary?.primary.port === fo.to && c.health.up, 'the connection on the new primary', 10_000);
      const movedMs = Date.now() - fo.switchedAt;
      await delay(500);
      const written = await stop();
      await done;
      const lost = await missing(s, written);
      assert.deepEqual(lost, [], `${lost.length} of ${written.length} writes taken as done are not on the new primary`);
      assert.ok(written.length > 20, `writes went on (${written.length})`);
      assert.equal(changes.length, 1, 'another server answers: told once');
      console.log(`      moved ${movedMs} ms after +switch-master; ${written.length} durable writes, ${c.unconfirmedWrites} acknowledged by the old primary and not taken as done`);
    });

    it('the old primary acknowledging writes after SENTINEL FAILOVER (no +switch-master heard): none taken as done, the connection moves at the first', async () => {
      const c = connect(s.url());
      (c.sentinels as unknown as { watch(): void }).watch = () => undefined; // as a client that does not hear the sentinels
      await c.open();
      const from = c.primary?.primary.port;
      const { done, stop } = writeLoop(c, 'b');
      await delay(200);
      const fo = await s.failover();
      assert.equal(fo.from, from);
      await until(() => c.primary?.primary.port === fo.to && c.health.up, 'the connection on the new primary', 15_000);
      await delay(300);
      const written = await stop();
      await done;
      assert.ok(c.unconfirmedWrites >= 1, 'the old primary acknowledged a write after the promotion, and it was not taken as done');
      assert.deepEqual(await missing(s, written), [], 'every write taken as done is on the new primary');
      console.log(`      ${c.unconfirmedWrites} write(s) acknowledged by the demoted primary, retried on the new one`);
    });

    it('kill -9 of the primary: the replica is promoted, the connection follows; alone, writes are confirmed by the sentinels', async () => {
      const c = connect(s.url());
      await c.open();
      const { done, stop } = writeLoop(c, 'c');
      await delay(200);
      const k = await s.killPrimary();
      await until(() => c.primary?.primary.port === k.to && c.health.up, 'the connection on the promoted replica', 15_000);
      assert.equal(c.primary?.replicas, 0, 'no healthy replica left: the sentinels confirm each durable write');
      await delay(300);
      const written = await stop();
      await done;
      assert.deepEqual(await missing(s, written), []);
      console.log(`      promoted ${k.switchedAt - k.killedAt} ms after the kill; the connection on it ${Date.now() - k.switchedAt} ms after +switch-master at most`);
      await s.restartStopped();
    });

    it('a failover: a held item whose state the new primary holds otherwise resumes from it, and nothing known here is put back over it', async () => {
      await untilAsync(() => s.replicaInSync(), 'the restarted node in sync', 15_000);
      const fleet = new Fleet({ url: s.url(), fleetKey: 'sentinel-resume', cycleMs: 150, leaseMs: 600, commandTimeoutMs: 1_000, connectTimeoutMs: 1_500 });
      open.push(fleet);
      const changes: Array<{ acquired: Array<{ item: string; saved: { rev: number; state: unknown } | null }>; released: Array<{ item: string; reason: string }> }> = [];
      const scope = fleet.scope<{ n: number }>('w1', { onChange: (c) => changes.push(c) });
      await scope.add(['T1']);
      await until(() => changes.some((c) => c.acquired.some((a) => a.item === 'T1')), 'T1 held');
      assert.equal((await scope.commit('T1', { n: 1 })).ok, true);
      const second = await scope.commit('T1', { n: 2 });
      assert.ok(second.ok);
      // The replica about to be promoted holds the state one commit behind: what the new primary has when the state
      // this replica holds came from a primary being replaced (a write it acknowledged alone, never taken as done).
      const stateKey = fleet.keys.scope('w1').state;
      const replica = s.admin(s.nodes.find((n) => n.port !== s.currentPrimary)?.port);
      const behind = (second as { rev: number }).rev - 1;
      await replica.config('SET', 'replica-read-only', 'no');
      await replica.hset(stateKey, 'T1', `${behind}::{"n":1}`);
      await replica.config('SET', 'replica-read-only', 'yes');
      const before = changes.length;
      await s.failover();
      await until(() => changes.slice(before).some((c) => c.released.some((r) => r.item === 'T1' && r.reason === 'restored')), 'T1 resumed from the new primary', 10_000);
      const resumed = changes.slice(before).flatMap((c) => c.acquired).find((a) => a.item === 'T1');
      assert.deepEqual(resumed?.saved, { rev: behind, state: { n: 1 } });
      await delay(600);
      const admin = s.admin(s.currentPrimary);
      assert.equal(await admin.hget(stateKey, 'T1'), `${behind}::{"n":1}`, 'the state this replica held is not put back over the new primary\'s');
      // And it goes on from there: the next commit is the next revision.
      const next = await scope.commit('T1', { n: 3 });
      assert.deepEqual(next, { ok: true, rev: behind + 1 });
    });
  });
});

async function untilAsync(cond: () => Promise<boolean>, what: string, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await cond().catch(() => false))) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await delay(100);
  }
}

/** Durable writes of a key each, one after another, until stop(): the keys of the writes taken as done. */
function writeLoop(c: FleetConnection, prefix: string): { done: Promise<void>; stop(): Promise<string[]> } {
  const written: string[] = [];
  let stopped = false;
  const done = (async () => {
    for (let i = 0; !stopped; i++) {
      const key = `mark:${prefix}:${i}`;
      // A write not taken as done is tried again (as a claim or a commit is) until it is.
      for (;;) {
        try {
          await c.eval(MARK.call({ key }, { value: '1' }));
          written.push(key);
          break;
        } catch {
          if (stopped) return;
          await delay(50);
        }
      }
      await delay(10);
    }
  })();
  return {
    done,
    stop: async () => {
      stopped = true;
      await done;
      return written;
    },
  };
}

/** The keys not on the current primary (asked once the sentinels agree on it). */
async function missing(s: RedisSentinel, keys: string[]): Promise<string[]> {
  const admin = s.admin(await s.primaryPort());
  const out: string[] = [];
  for (const k of keys) if (!(await admin.exists(k))) out.push(k);
  return out;
}

/** A sentinel that names another primary: answers the three questions the fleet asks (RESP), +OK to anything else. */
async function fakeSentinel(host: string, port: number): Promise<{ port: number; close(): void }> {
  const bulk = (s: string) => `$${Buffer.byteLength(s)}\r\n${s}\r\n`;
  const server = net.createServer((sock) => {
    let buf = '';
    sock.on('error', () => undefined);
    sock.on('data', (d) => {
      buf += d.toString();
      for (;;) {
        const m = /^\*(\d+)\r\n/.exec(buf);
        if (!m) return;
        let at = m[0].length;
        const args: string[] = [];
        for (let i = 0; i < Number(m[1]); i++) {
          const l = /^\$(\d+)\r\n/.exec(buf.slice(at));
          if (!l || buf.length < at + l[0].length + Number(l[1]) + 2) return;
          args.push(buf.substr(at + l[0].length, Number(l[1])));
          at += l[0].length + Number(l[1]) + 2;
        }
        buf = buf.slice(at);
        const q = args.map((a) => a.toUpperCase());
        if (q[0] === 'SENTINEL' && q[1] === 'GET-MASTER-ADDR-BY-NAME') sock.write(`*2\r\n${bulk(host)}${bulk(String(port))}`);
        else if (q[0] === 'SENTINEL' && q[1] === 'MASTER') sock.write(`*4\r\n${bulk('name')}${bulk(args[2])}${bulk('flags')}${bulk('master')}`);
        else if (q[0] === 'SENTINEL' && q[1] === 'REPLICAS') sock.write('*0\r\n');
        else sock.write('+OK\r\n');
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return { port: (server.address() as net.AddressInfo).port, close: () => server.close() };
}
