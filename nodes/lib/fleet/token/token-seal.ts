/**
 * The fleet's access token as Redis holds it (docs/fleet.md, "Token"): under
 * a key named by the account it was issued for, sealed with a key derived
 * from the client secret. Whoever reads Redis (a backup, a replica of Redis,
 * a wrong ACL) gets no usable token, and a replica configured with another
 * secret reads the fleet's token as "no token" rather than using it.
 *
 * - Name: a digest of the token URL, client ID, scope and extra token
 *   parameters: one fleet key used by two client IDs (or two scopes) keeps two
 *   tokens, never one token for both accounts. The secret is not in it, so a
 *   rotated secret keeps the name (the old token no longer opens, and is
 *   replaced).
 * - Seal: AES-256-GCM (node:crypto) with a random 96-bit IV; the key is
 *   scrypt(client secret, salt = the name's digest), computed once per
 *   identity (about 50 ms, off the event loop); the Redis key name is the
 *   additional data, so a sealed token copied to another key does not open.
 */
import { createCipheriv, createDecipheriv, randomBytes, scrypt } from 'node:crypto';
import type { TokenIdentity } from '../../client/fleet-hooks';
import { digestOf } from '../redis/keys';

const VERSION = 'v1';
const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;
/** scrypt's cost: 2^14 (16 MiB, tens of ms): a guessed secret costs as much; a random secret cannot be guessed anyway. */
const SCRYPT = { N: 2 ** 14, r: 8, p: 1, maxmem: 64 * 1024 * 1024 };

/** The part of a token's Redis key that says which account it belongs to. */
export function tokenIdentityDigest(identity: TokenIdentity): string {
  return digestOf(['token', identity.tokenUrl, identity.clientId, identity.scope, identity.tokenParams]);
}

export class TokenSeal {
  private readonly keys = new Map<string, Promise<Buffer>>();

  /** The sealed text to store under `keyName`. */
  async seal(token: string, identity: TokenIdentity, keyName: string): Promise<string> {
    const key = await this.keyFor(identity);
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(Buffer.from(keyName, 'utf8'));
    const sealed = Buffer.concat([cipher.update(token, 'utf8'), cipher.final()]);
    return [VERSION, iv.toString('base64'), cipher.getAuthTag().toString('base64'), sealed.toString('base64')].join('.');
  }

  /** The token, or null when the text was sealed with another secret, for another key, or is not a sealed token. */
  async open(text: string, identity: TokenIdentity, keyName: string): Promise<string | null> {
    const parts = text.split('.');
    if (parts.length !== 4 || parts[0] !== VERSION) return null;
    const iv = Buffer.from(parts[1], 'base64');
    const tag = Buffer.from(parts[2], 'base64');
    // GCM checks only as many tag bytes as it is given: a tag cut to 4 bytes would still open, and be 2^32 tries from a forgery.
    if (iv.length !== IV_BYTES || tag.length !== TAG_BYTES) return null;
    const key = await this.keyFor(identity);
    try {
      const decipher = createDecipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
      decipher.setAAD(Buffer.from(keyName, 'utf8'));
      decipher.setAuthTag(tag);
      return Buffer.concat([decipher.update(Buffer.from(parts[3], 'base64')), decipher.final()]).toString('utf8');
    } catch {
      return null;
    }
  }

  private keyFor(identity: TokenIdentity): Promise<Buffer> {
    const salt = tokenIdentityDigest(identity);
    // The map is keyed by salt and secret together: a configuration redeployed with a new secret gets a new key.
    const id = digestOf([salt, identity.clientSecret]);
    let key = this.keys.get(id);
    if (!key) {
      key = new Promise<Buffer>((resolve, reject) => scrypt(identity.clientSecret, salt, KEY_BYTES, SCRYPT, (err, k) => (err ? reject(err) : resolve(k))));
      this.keys.set(id, key);
      // Failures are not kept: the next fetch derives again.
      key.catch(() => this.keys.delete(id));
    }
    return key;
  }
}
