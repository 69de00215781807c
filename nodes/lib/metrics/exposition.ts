/**
 * What charging-metrics makes of a message: the format msg.format asks for,
 * and the headers for core `http response` (the content type of the
 * exposition; a content type or length an earlier node left, such as an
 * `http request` node's answer, would describe another body, so it goes).
 */
import { ChargingError } from '../errors';
import type { ScrapeFormat } from './registry';

/** msg.format: absent or empty, "prometheus" or "text": the text exposition; "json": the same values as an object. */
export function scrapeFormat(format: unknown): ScrapeFormat {
  if (format === undefined || format === null) return 'text';
  const f = typeof format === 'string' ? format.trim().toLowerCase() : undefined;
  if (f === '' || f === 'prometheus' || f === 'text') return 'text';
  if (f === 'json') return 'json';
  throw new ChargingError('INVALID_INPUT', 'msg.format must be "prometheus" (the text exposition, also when msg.format is not set) or "json"', { field: 'format' });
}

/** The headers to answer with: those set before, but for any content type or length, and the exposition's content type. */
export function responseHeaders(headers: unknown, contentType: string): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (headers && typeof headers === 'object' && !Array.isArray(headers)) {
    for (const [k, v] of Object.entries(headers)) if (!/^content-(type|length)$/i.test(k)) out[k] = v;
  }
  out['content-type'] = contentType;
  return out;
}
