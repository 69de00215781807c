/**
 * Rendezvous (highest random weight) hashing: which live replica owns a
 * token. Every replica that sees the same list of live replicas computes the
 * same owner, with no message between them; tokens spread evenly; and when a
 * replica joins or leaves only the tokens it gains or loses change hands
 * (about 1/N of them), not the whole fleet's. Leases (ownership.ts) make each
 * hand-over safe; this only says who should hold them.
 */

/** FNV-1a over UTF-16 code units, 32 bits: fast and good enough as a seed for mix32. */
function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** MurmurHash3's finaliser: every input bit affects every output bit. */
function mix32(x: number): number {
  let h = x >>> 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** The owners of tokens among one set of live replicas (hash each replica once, each token once). */
export class Rendezvous {
  private readonly ids: string[];
  private readonly seeds: number[];

  constructor(replicas: Iterable<string>) {
    this.ids = [...new Set(replicas)].sort();
    this.seeds = this.ids.map((id) => mix32(fnv1a(id)));
  }

  get replicas(): readonly string[] {
    return this.ids;
  }

  /** The replica that should own this token; undefined when no replica is live. */
  ownerOf(token: string): string | undefined {
    const t = mix32(fnv1a(token) ^ 0x9e3779b9);
    let best = -1;
    let owner: string | undefined;
    for (let i = 0; i < this.ids.length; i++) {
      const score = mix32(t ^ this.seeds[i]);
      // ids are sorted, so a tie (1 in 2^32) goes to the same replica everywhere
      if (score > best) {
        best = score;
        owner = this.ids[i];
      }
    }
    return owner;
  }
}
