/**
 * Replaces every known secret (client secret, access tokens, the Basic
 * credentials) in a piece of text. Applied to every message that leaves the
 * client, so that even a service that echoes our token in its error body, or a
 * library error that quotes a header, cannot carry a secret into a flow or a log.
 */
export class Redactor {
  private readonly secrets = new Set<string>();

  add(secret: string | undefined | null): void {
    // Very short values would redact ordinary words; real secrets are longer.
    if (typeof secret === 'string' && secret.length >= 4) this.secrets.add(secret);
  }

  remove(secret: string): void {
    this.secrets.delete(secret);
  }

  redact(text: string): string {
    let out = text;
    for (const s of this.secrets) {
      if (out.includes(s)) out = out.split(s).join('***');
    }
    return out;
  }
}
