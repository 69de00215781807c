import assert from 'node:assert/strict';
import { describeBody, readJson, MAX_SERVICE_TEXT } from '../../../nodes/lib/client/response-body';
import { Redactor } from '../../../nodes/lib/client/redactor';
import { ChargingError } from '../../../nodes/lib/errors';

describe('response-body: reading what the service sends (no HTTP)', () => {
  const redactor = new Redactor();
  redactor.add('s3cret-value');

  describe('describeBody: the service text of an error, one line', () => {
    it('pulls the usual message fields out of a JSON error body', () => {
      assert.equal(describeBody('{"error":"invalid_client","error_description":"bad secret"}', redactor), 'invalid_client: bad secret');
      assert.equal(describeBody('{"error":{"message":"busy"}}', redactor), 'busy');
      assert.equal(describeBody('{"code":7}', redactor), '{"code":7}');
    });

    it('collapses whitespace and cuts long text, after redacting', () => {
      const text = describeBody(`line one\n\n   line two ${'x'.repeat(1000)}`, redactor) ?? '';
      assert.ok(text.startsWith('line one line two x'));
      assert.equal(text.length, MAX_SERVICE_TEXT + 1);
      assert.ok(text.endsWith('…'));
    });

    it('gives nothing for an empty or missing body', () => {
      assert.equal(describeBody('', redactor), undefined);
      assert.equal(describeBody('   ', redactor), undefined);
      assert.equal(describeBody(null, redactor), undefined);
    });

    it('reads a body nested thousands deep without overflowing', () => {
      const deep = `${'{"error":'.repeat(5000)}"x"${'}'.repeat(5000)}`;
      assert.equal(typeof describeBody(deep, redactor), 'string');
    });
  });

  describe('readJson: a success body as a value', () => {
    it('parses, and gives null for an empty body', () => {
      assert.deepEqual(readJson('{"a":[1,2]}', redactor, 'x', 200), { a: [1, 2] });
      assert.equal(readJson('  ', redactor, 'x', 200), null);
    });

    it('refuses text that is not JSON, and JSON deeper than 64 levels, as BAD_RESPONSE', () => {
      assert.throws(() => readJson('<html>', redactor, 'progress query', 200), (e: ChargingError) => e.code === 'BAD_RESPONSE' && /not valid JSON \(6 bytes\)/.test(e.message));
      const at = (n: number) => `${'['.repeat(n)}${']'.repeat(n)}`;
      assert.doesNotThrow(() => readJson(at(64), redactor, 'x', 200));
      assert.throws(() => readJson(at(65), redactor, 'x', 200), /nested deeper than 64 levels/);
    });

    it('scrubs a known secret before parsing, also one spelled with \\u escapes', () => {
      assert.deepEqual(readJson('{"echo":"Bearer s3cret-value"}', redactor, 'x', 200), { echo: 'Bearer ***' });
      const escaped = [...'s3cret-value'].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('');
      assert.deepEqual(readJson(`{"echo":"${escaped}"}`, redactor, 'x', 200), { echo: '***' });
    });
  });

  describe('Redactor', () => {
    it('replaces a secret in its raw, JSON-escaped, URL-encoded and form-encoded forms', () => {
      const r = new Redactor();
      const secret = 'a"b\\c d+e%f';
      r.add(secret);
      for (const form of [secret, JSON.stringify(secret).slice(1, -1), encodeURIComponent(secret), new URLSearchParams({ s: secret }).toString().slice(2)]) {
        assert.equal(r.redact(`x ${form} y`), 'x *** y', form);
      }
    });

    it('ignores values too short to be secrets, and forgets removed ones', () => {
      const r = new Redactor();
      r.add('abc');
      r.add('token-1234');
      assert.equal(r.redact('abc token-1234'), 'abc ***');
      r.remove('token-1234');
      assert.equal(r.redact('token-1234'), 'token-1234');
    });
  });
});
