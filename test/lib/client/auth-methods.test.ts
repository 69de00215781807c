/**
 * Client authentication at the token endpoint (issue: "works with any OAuth
 * server"): each of the three methods against a simulator that accepts only
 * that one, with a generated-looking secret containing + % & = and a space,
 * which is where raw Basic and RFC 6749 §2.3.1 differ.
 */
import assert from 'node:assert/strict';
import type { ChargingServiceSimulator } from '../../../simulator/simulator';
import { AUTH_METHODS, AuthMethod } from '../../../nodes/lib/client/token-endpoint';
import { clientFor, rejection, startSimulator, assertNoSecret } from '../../harness';

const SECRET = 'a+b%2Fc&d=e f/ü';

describe('client authentication methods (basic, basic-form-encoded, client_secret_post)', () => {
  let sim: ChargingServiceSimulator | null = null;
  afterEach(async () => {
    await sim?.stop();
    sim = null;
  });

  for (const accepted of AUTH_METHODS) {
    for (const sent of AUTH_METHODS) {
      it(`server accepts ${accepted}, client sends ${sent}: ${accepted === sent ? 'token issued, query answered' : 'AUTH error, no token'}`, async () => {
        sim = await startSimulator({ authMethod: accepted, clientSecret: SECRET });
        const client = clientFor(sim, { clientSecret: SECRET, authMethod: sent });
        try {
          if (accepted === sent) {
            const res = await client.getProgress('NOBODY');
            assert.equal(res.record, null);
            assert.equal(sim.counters.tokensIssued, 1);
          } else {
            const err = await rejection(client.getProgress('NOBODY'));
            assert.equal(err.code, 'AUTH');
            assert.equal(sim.counters.tokensIssued, 0);
            assertNoSecret(JSON.stringify({ m: err.message, s: err.serviceMessage }), [SECRET], 'the error');
          }
        } finally {
          await client.close();
        }
      });
    }
  }

  it('what each method puts on the wire: raw Basic, form-encoded Basic, form fields without Authorization', async () => {
    const seen: Partial<Record<AuthMethod, { authorization?: string; body: string }>> = {};
    for (const m of AUTH_METHODS) {
      sim = await startSimulator({ authMethod: m, clientSecret: SECRET });
      const client = clientFor(sim, { clientSecret: SECRET, authMethod: m });
      await client.getProgress('NOBODY');
      await client.close();
      const tokenRequest = sim.requests.find((r) => r.path.endsWith('/v1/token'));
      seen[m] = { authorization: tokenRequest?.headers.authorization, body: tokenRequest?.body ?? '' };
      await sim.stop();
      sim = null;
    }
    const basic = (v: string | undefined) => Buffer.from(String(v).replace(/^Basic /, ''), 'base64').toString('utf8');
    assert.equal(basic(seen.basic?.authorization), `test-client:${SECRET}`);
    assert.equal(basic(seen['basic-form-encoded']?.authorization), 'test-client:a%2Bb%252Fc%26d%3De+f%2F%C3%BC');
    assert.equal(seen.client_secret_post?.authorization, undefined);
    const form = new URLSearchParams(seen.client_secret_post?.body);
    assert.equal(form.get('client_id'), 'test-client');
    assert.equal(form.get('client_secret'), SECRET);
    assert.equal(form.get('grant_type'), 'client_credentials');
  });

  for (const accepted of AUTH_METHODS) {
    it(`Test connection configured as basic against a ${accepted} server: ${accepted === 'basic' ? 'ok' : `suggests ${accepted}, never shows the secret`}`, async () => {
      sim = await startSimulator({ authMethod: accepted, clientSecret: SECRET });
      const client = clientFor(sim, { clientSecret: SECRET, authMethod: 'basic' });
      try {
        const report = await client.testConnection();
        if (accepted === 'basic') {
          assert.equal(report.ok, true);
          assert.equal(report.suggestedAuthMethod, undefined);
        } else {
          assert.equal(report.ok, false);
          assert.equal(report.suggestedAuthMethod, accepted);
          assert.match(report.message, new RegExp(`accepts "${accepted}": switch Authentication`));
          assertNoSecret(JSON.stringify(report), [SECRET], 'the report');
          // Only the token endpoint was tried: the service saw nothing.
          assert.equal(sim.requests.filter((r) => !r.path.includes('/auth/')).length, 0);
        }
      } finally {
        await client.close();
      }
    });
  }

  it('Test connection with wrong credentials under every method: refused, no suggestion, the hint names authentication', async () => {
    sim = await startSimulator({ authMethod: 'basic' });
    const client = clientFor(sim, { clientSecret: 'wrong-secret' });
    try {
      const err = await rejection(client.testConnection());
      assert.equal(err.code, 'AUTH');
      assert.match(err.message, /client authentication/);
      assert.equal(sim.counters.tokensIssued, 0);
    } finally {
      await client.close();
    }
  });

  it('Test connection with a base URL that is not the service: token received, but not ok', async () => {
    sim = await startSimulator();
    const client = clientFor(sim, { baseUrl: `${sim.baseUrl}/not-the-service` });
    try {
      const report = await client.testConnection();
      assert.equal(report.ok, false);
      assert.match(report.message, /^Token received/);
    } finally {
      await client.close();
    }
  });
});
