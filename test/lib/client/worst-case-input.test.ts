/**
 * Every regex that reads data from outside (a service's body or headers, a
 * Redis error, a value typed in the dialog) fed its worst case: the input that
 * makes a backtracking regex rescan the rest of the text from every start.
 * The bounds are the ones the requirement sets for these pathological cases:
 * a 1 MiB body in under 100 ms, a 40 000-character URL in under 50 ms. A
 * quadratic regex misses them by an order of magnitude (0.47 s at 48 KB for
 * the old `route .*not found`, 0.67 s for `/\/+$/` on 40 000 slashes), so
 * the best of three runs is compared, which keeps the bound and ignores a
 * busy machine's hiccup.
 *
 * No ReDoS checker (recheck, safe-regex2) is installed here; these inputs are
 * the check. Regexes not listed read only fixed texts (Node's error codes,
 * hpagent's "Bad response: <status>", the message catalogs), text already cut
 * to 300 characters (status and log lines), the last 6 characters of a
 * timestamp, or are the simulator's (a test tool, behind Node's 16 KiB header
 * limit, each anchored with one quantifier).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import vm from 'node:vm';
import { describeBody, readJson } from '../../../nodes/lib/client/response-body';
import { gatewayRefusal, looksLikeNoSession, notFoundError } from '../../../nodes/lib/client/gateway';
import type { RawResponse } from '../../../nodes/lib/client/transport';
import { Redactor } from '../../../nodes/lib/client/redactor';
import { sessionsEndpoint } from '../../../nodes/lib/client/service-client';
import { parseRetryAfter } from '../../../nodes/lib/client/backoff';
import { noProxyMatches, proxyChoice } from '../../../nodes/lib/client/proxy-env';
import { isInvalidClient, parseTokenParams } from '../../../nodes/lib/client/token-endpoint';
import { checkEndpointUrl, envReference, isLoopback, trimTrailingSlashes } from '../../../nodes/lib/settings';
import { fleetKeyFor } from '../../../nodes/lib/fleet/redis/keys';
import { FleetConnection } from '../../../nodes/lib/fleet/redis/connection';
import { normaliseField } from '../../../nodes/lib/session/inputs';
import { ChargingError } from '../../../nodes/lib/errors';

const MIB = 1024 * 1024;
const BODY_BOUND_MS = 100;
const URL_BOUND_MS = 50;

/** Best of three runs, in ms; the result of the last run. */
function timed<T>(fn: () => T): { ms: number; result: T } {
  let best = Infinity;
  let result!: T;
  for (let i = 0; i < 3; i++) {
    const t0 = performance.now();
    result = fn();
    best = Math.min(best, performance.now() - t0);
  }
  return { ms: best, result };
}

/** `unit` repeated to `size` characters. */
function fill(unit: string, size: number): string {
  return unit.repeat(Math.ceil(size / unit.length)).slice(0, size);
}

/** A JSON error body of about 1 MiB whose message is `unit` repeated. */
function jsonBody(unit: string): string {
  return JSON.stringify({ message: fill(unit, MIB - 20) });
}

function response(status: number, text: string, headers: Record<string, string> = { 'content-type': 'application/json' }): RawResponse {
  return { status, headers, text } as unknown as RawResponse;
}

const OP = { method: 'GET', what: 'Progress query' } as const;

describe('worst-case input for every regex that reads outside data', () => {
  const redactor = new Redactor();
  redactor.add('a-known-secret-value');

  describe('a service body of 1 MiB is classified in under 100 ms', () => {
    // Each unit starts a partial match of one of the gateway phrases that never completes.
    for (const unit of ['route ', 'Route x ', 'no matching ', 'cannot get ', 'unknown ', 'resource not ', 'api ', 'page ', 'no such ', 'missing authentication ', ' \t\n ']) {
      it(`a 404 body of ${JSON.stringify(unit)} repeated`, () => {
        const body = jsonBody(unit);
        const { ms, result } = timed(() => notFoundError(response(404, body), OP, 'http://127.0.0.1', redactor));
        assert.ok(ms < BODY_BOUND_MS, `${ms.toFixed(1)} ms`);
        // The answer is still read: a body that is the service's JSON with no gateway phrase is "no session".
        assert.equal(result, undefined);
      });
    }

    it('still finds "route … not found" on one line, and not across lines', () => {
      assert.ok(notFoundError(response(404, JSON.stringify({ message: 'Route GET /x not found' })), OP, 'h', redactor));
      assert.equal(notFoundError(response(404, JSON.stringify({ message: 'route a\nis not found' })), OP, 'h', redactor), undefined);
    });

    it('a 404 body that ends with the phrase after 1 MiB of "route "', () => {
      const body = JSON.stringify({ message: `${fill('route ', MIB)}x not found` });
      const { ms, result } = timed(() => notFoundError(response(404, body), OP, 'http://127.0.0.1', redactor));
      assert.ok(ms < BODY_BOUND_MS, `${ms.toFixed(1)} ms`);
      assert.ok(result instanceof ChargingError);
    });

    it("Test connection's probe answer (no session or no such path)", () => {
      for (const unit of ['cannot ', 'no such ', 'no rout', 'route no', '<htm', 'sessio']) {
        const text = fill(unit, MIB);
        const { ms } = timed(() => looksLikeNoSession(text, 'connection-test-0123'));
        assert.ok(ms < BODY_BOUND_MS, `${unit}: ${ms.toFixed(1)} ms`);
      }
    });

    it('an error body as one line (whitespace collapsed) and a success body (blank or not)', () => {
      for (const unit of [' \t', ' a', '\n\n\nb']) {
        const text = fill(unit, MIB);
        assert.ok(timed(() => describeBody(text, redactor)).ms < BODY_BOUND_MS, `describeBody ${JSON.stringify(unit)}`);
      }
      const blank = fill(' ', MIB);
      assert.ok(timed(() => readJson(blank, redactor, 'x', 200)).ms < BODY_BOUND_MS, 'readJson of 1 MiB of spaces');
    });

    it('a token endpoint body that mentions invalid_ without the rest', () => {
      const err = new ChargingError('AUTH', 'x', { statusCode: 400, serviceMessage: fill('invalid_clien', MIB) });
      assert.ok(timed(() => isInvalidClient(err)).ms < BODY_BOUND_MS);
    });
  });

  describe('headers (bounded by Node to 16 KiB, fed 1 MiB here)', () => {
    it('WWW-Authenticate without "Bearer", Retry-After of digits with a letter at the end', () => {
      const challenge = fill('beare', MIB);
      assert.ok(timed(() => gatewayRefusal(response(401, '', { 'www-authenticate': challenge }), false)).ms < BODY_BOUND_MS);
      const retryAfter = `${fill('1', MIB)}x`;
      const { ms, result } = timed(() => parseRetryAfter(retryAfter));
      assert.ok(ms < BODY_BOUND_MS, `${ms.toFixed(1)} ms`);
      assert.equal(result, undefined);
    });
  });

  describe("Redis's error texts", () => {
    it('a 1 MiB error text that starts every phrase the classifier looks for', () => {
      const connection = new FleetConnection({ url: 'redis://127.0.0.1:1' });
      try {
        for (const unit of ['WRONGPAS', 'invalid ', 'self-signed ', 'Command timed ', 'LOADIN', 'Hostname/IP does not ']) {
          const err = new Error(fill(unit, MIB));
          const { ms } = timed(() => connection.toError(err, 'test'));
          assert.ok(ms < BODY_BOUND_MS, `${unit}: ${ms.toFixed(1)} ms`);
        }
      } finally {
        void connection.close();
      }
    });
  });

  describe('a URL or value typed in the dialog, 40 000 characters, in under 50 ms', () => {
    const slashes = `http://127.0.0.1/${'/'.repeat(40_000)}x`;

    it('the service and fleet key paths of a URL with 40 000 slashes', () => {
      const endpoint = timed(() => sessionsEndpoint(slashes));
      assert.ok(endpoint.ms < URL_BOUND_MS, `sessionsEndpoint: ${endpoint.ms.toFixed(1)} ms`);
      assert.ok(endpoint.result.endsWith('x/poi/v1/charging-sessions'));
      const key = timed(() => fleetKeyFor({ baseUrl: slashes, tokenUrl: slashes, clientId: 'c' }));
      assert.ok(key.ms < URL_BOUND_MS, `fleetKeyFor: ${key.ms.toFixed(1)} ms`);
      const trimmed = timed(() => trimTrailingSlashes(`x${'/'.repeat(40_000)}`));
      assert.ok(trimmed.ms < URL_BOUND_MS);
      assert.equal(trimmed.result, 'x');
    });

    it('the URL check refuses a URL that long before any other look at it', () => {
      const { ms } = timed(() => assert.throws(() => checkEndpointUrl('Base URL', slashes, false), /longer than 2048 characters/));
      assert.ok(ms < URL_BOUND_MS);
    });

    it('${NAME}, loopback host, token parameters and command fields', () => {
      const cases: Array<[string, () => unknown]> = [
        ['envReference', () => envReference(`\${${'}'.repeat(40_000)} x`)],
        ['envReference 2', () => envReference(`\${${'a'.repeat(40_000)}`)],
        ['isLoopback', () => isLoopback(`[${']'.repeat(40_000)}x`)],
        ['isLoopback 127', () => isLoopback(`127${'.1'.repeat(20_000)}`)],
        ['parseTokenParams', () => assert.throws(() => parseTokenParams(`${'a'.repeat(40_000)} =1`))],
        ['parseTokenParams +', () => parseTokenParams(`a=${'+'.repeat(40_000)}`)],
        ['NO_PROXY host:port', () => noProxyMatches(`${'1:'.repeat(20_000)}x`, 'h', 80)],
        ['NO_PROXY brackets', () => noProxyMatches(`[${':'.repeat(40_000)}`, 'h', 80)],
        ['NO_PROXY domain', () => noProxyMatches(`${'a.'.repeat(20_000)}-`, 'h', 80)],
        ['HTTP_PROXY scheme', () => proxyChoice('http://h/', { HTTP_PROXY: `a${'a'.repeat(40_000)}:/x` })],
        ['normaliseField', () => normaliseField('token', `${' '.repeat(20_000)}${'a'.repeat(256)}${' '.repeat(20_000)}`, 'msg.payload')],
      ];
      for (const [name, run] of cases) {
        const { ms } = timed(run);
        assert.ok(ms < URL_BOUND_MS, `${name}: ${ms.toFixed(1)} ms`);
      }
    });

    it("the editor's own checks (resources/charging-editor.js)", () => {
      const code = fs.readFileSync(path.join(__dirname, '..', '..', '..', '..', 'resources', 'charging-editor.js'), 'utf8');
      const sandbox: Record<string, unknown> = { URL, RED: { _: (key: string) => key } };
      sandbox.window = sandbox;
      vm.runInNewContext(code, sandbox);
      const validate = (v: string) => (sandbox.ChargingEditor as { urlValidator(k: string): (v: string, o: unknown) => unknown }).urlValidator('baseUrl').call({ allowInsecureHttp: false }, v, {});
      const editor = sandbox.ChargingEditor as { isLoopback(h: string): boolean; isEnvReference(v: string): boolean; urlValidator(k: string): (v: string, o: unknown) => unknown };
      const cases: Array<[string, () => unknown]> = [
        ['isEnvReference', () => editor.isEnvReference(`\${${'a'.repeat(40_000)}!}`)],
        ['isLoopback', () => editor.isLoopback(`${'.localhos'.repeat(4_000)}x`)],
        ['urlValidator', () => validate(slashes)],
      ];
      for (const [name, run] of cases) {
        const { ms } = timed(run);
        assert.ok(ms < URL_BOUND_MS, `${name}: ${ms.toFixed(1)} ms`);
      }
    });
  });
});
