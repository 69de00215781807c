/** Exponential back-off with full jitter (AWS architecture blog, "Exponential Backoff And Jitter"). */
export function backoffDelay(attempt: number, baseMs: number, maxMs: number, random: () => number = Math.random): number {
  const ceiling = Math.min(maxMs, baseMs * 2 ** Math.max(0, attempt - 1));
  // Never zero: a floor of half the ceiling keeps retries from bunching at 0 ms.
  return Math.round(ceiling / 2 + random() * (ceiling / 2));
}

/**
 * Retry-After as milliseconds: delta-seconds or an HTTP-date (RFC 9110 §10.2.3).
 * Undefined when absent or unreadable.
 */
export function parseRetryAfter(value: unknown, now: number = Date.now()): number | undefined {
  if (typeof value !== 'string' || value.trim() === '') return undefined;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  const date = Date.parse(v);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, date - now);
}
