/**
 * The seal of the fleet's token, attacked as whoever can write to Redis would:
 * a wrong secret, a changed byte, a shortened authentication tag, a sealed
 * token moved to another key or another account. Each must open as "no
 * token" (null), never as a token.
 */
import assert from 'node:assert/strict';
import { TokenSeal } from '../../../nodes/lib/fleet/token/token-seal';
import { CLIENT_ID, CLIENT_SECRET } from '../../harness';

const IDENTITY = { tokenUrl: 'https://auth.example/v1/token', clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, scope: '', tokenParams: [] };
const KEY = 'chargectl:fleet:f:token:abc';
const TOKEN = 'eyJhbGciOi.the-fleet-access-token.value-0123456789';

function withPart(sealed: string, index: number, change: (b: Buffer) => Buffer): string {
  const parts = sealed.split('.');
  parts[index] = change(Buffer.from(parts[index], 'base64')).toString('base64');
  return parts.join('.');
}

describe('fleet: the token seal against a Redis writer', () => {
  const seal = new TokenSeal();
  let sealed: string;
  before(async () => {
    sealed = await seal.seal(TOKEN, IDENTITY, KEY);
  });

  it('opens what it sealed, and not with another secret', async () => {
    assert.equal(await seal.open(sealed, IDENTITY, KEY), TOKEN);
    assert.equal(await seal.open(sealed, { ...IDENTITY, clientSecret: `${CLIENT_SECRET}x` }, KEY), null);
  });

  it('does not open a sealed token moved to another key, or to another account', async () => {
    assert.equal(await seal.open(sealed, IDENTITY, `${KEY}x`), null);
    assert.equal(await seal.open(sealed, { ...IDENTITY, clientId: 'another-client' }, KEY), null);
  });

  it('does not open a changed ciphertext, IV or tag', async () => {
    for (const index of [1, 2, 3]) {
      const flipped = withPart(sealed, index, (b) => {
        const c = Buffer.from(b);
        c[0] ^= 1;
        return c;
      });
      assert.equal(await seal.open(flipped, IDENTITY, KEY), null, `part ${index}`);
    }
  });

  it('does not open with a shortened authentication tag (GCM would check only its first bytes)', async () => {
    for (const bytes of [4, 8, 12, 15]) {
      const short = withPart(sealed, 2, (b) => b.subarray(0, bytes));
      assert.equal(await seal.open(short, IDENTITY, KEY), null, `a ${bytes}-byte tag`);
    }
  });

  it('does not open a text that is not a sealed token, and never throws', async () => {
    for (const text of ['', '.', 'v1...', 'v1.a.b.c', `v2${sealed.slice(2)}`, `${sealed}.x`, 'v1.!!!.###.$$$']) {
      assert.equal(await seal.open(text, IDENTITY, KEY), null, text);
    }
  });
});
