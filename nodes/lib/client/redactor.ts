/**
 * Replaces every known secret (client secret, access tokens, Basic credential
 * values, a proxy password) in a piece of text, in every form a server can echo
 * it back in: raw, JSON-escaped, URL-encoded and form-encoded. Applied to text
 * before it is cut, reformatted or parsed, so that no part of a secret can
 * survive: a secret straddling a cut, or re-escaped inside a JSON string, is
 * still a whole secret when the redactor sees it.
 */
export class Redactor {
  /** every form of every secret, longest first so that a longer form is replaced before a part of it */
  private forms: string[] = [];
  private readonly bySecret = new Map<string, string[]>();

  add(secret: string | undefined | null): void {
    // Very short values would redact ordinary words; real secrets are longer.
    if (typeof secret !== 'string' || secret.length < 4 || this.bySecret.has(secret)) return;
    this.bySecret.set(secret, formsOf(secret));
    this.rebuild();
  }

  remove(secret: string): void {
    if (this.bySecret.delete(secret)) this.rebuild();
  }

  /** Cheap when nothing matches: one `includes` per form, no allocation. */
  redact(text: string): string {
    let out = text;
    for (const f of this.forms) {
      if (out.includes(f)) out = out.split(f).join('***');
    }
    return out;
  }

  /** True when the text holds a known secret in any form. */
  matches(text: string): boolean {
    for (const f of this.forms) if (text.includes(f)) return true;
    return false;
  }

  private rebuild(): void {
    const all = new Set<string>();
    for (const forms of this.bySecret.values()) for (const f of forms) all.add(f);
    this.forms = [...all].sort((a, b) => b.length - a.length);
  }
}

function formsOf(secret: string): string[] {
  const forms = new Set<string>([secret]);
  forms.add(JSON.stringify(secret).slice(1, -1));
  try {
    forms.add(encodeURIComponent(secret));
  } catch {
    // an unpaired surrogate cannot be URL-encoded, so it cannot be echoed so either
  }
  forms.add(new URLSearchParams({ s: secret }).toString().slice(2));
  return [...forms].filter((f) => f.length >= 4);
}
