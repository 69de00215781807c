/**
 * How a badge's key and values become text: in the language of the Node-RED
 * runtime a node runs in, through that runtime's RED._, with the English
 * catalog that ships with the package where the runtime has none for us.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { NodeAPI } from 'node-red';
import type { StatusKey, Values } from './status';

export type Translate = (key: StatusKey, values?: Values) => string;

/**
 * The "status" catalog's place in the runtime's i18n: the charging-service
 * node set's namespace. RED._ of another node set (charging-progress's) looks
 * keys up in its own namespace unless told which, and every badge's text lives
 * in charging-service.json.
 */
const CATALOG_NAMESPACE = '@chargectl/node-red-charging-session/charging-service';

/** The English catalog that ships with the package (dist/nodes/locales); empty if it cannot be read. */
function readEnglishCatalog(): unknown {
  try {
    const file = path.join(__dirname, '..', 'locales', 'en-US', 'charging-service.json');
    return (JSON.parse(fs.readFileSync(file, 'utf8')) as { 'charging-service': { status: unknown } })['charging-service'].status;
  } catch {
    // a damaged install: badges show their keys rather than the node failing to load
    return {};
  }
}

/** Read once when the module loads and never changed: the same for every runtime. */
const englishCatalog = readEnglishCatalog();

function englishTemplate(key: string): string | null {
  const text = key.split('.').reduce<unknown>((o, k) => (o && typeof o === 'object' ? (o as Record<string, unknown>)[k] : undefined), englishCatalog);
  return typeof text === 'string' ? text : null;
}

/** i18next's placeholders, __name__, filled in one pass (a value is never read as a placeholder). */
function fill(template: string, values: NonNullable<Values>): string {
  return template.replace(/__(\w+)__/g, (m, name: string) => (name in values ? String(values[name]) : m));
}

/** Badges in English, from the package's own catalog: a board given no runtime's language. */
export const inEnglish: Translate = (key, values = {}) => {
  const text = englishTemplate(key);
  return text === null ? key : fill(text, values);
};

/**
 * Badges in the language of the runtime `RED` belongs to (settings.js `lang`,
 * or the system's). Where the runtime has no catalog for us (RED._ hands the
 * key back, as the test helper's does), the English catalog fills in.
 */
export function runtimeLanguage(RED: Pick<NodeAPI, '_'>): Translate {
  // One runtime look-up per key, not per badge: i18next takes ~0.5 ms a call
  // (plural rules for __count__), which a watch node showing four badges a
  // second paid on every one. The key is asked for with each
  // placeholder standing for itself, so the runtime hands back its template in
  // its language; the values are filled in here. The catalogs have no plural forms.
  const templates = new Map<string, string | null>();
  return (key, values = {}) => {
    let template = templates.get(key);
    if (template === undefined) {
      const local = `charging-service.status.${key}`;
      const full = `${CATALOG_NAMESPACE}:${local}`;
      const own: Record<string, string> = {};
      for (const m of (englishTemplate(key) ?? '').matchAll(/__(\w+)__/g)) own[m[1]] = `__${m[1]}__`;
      const text = RED._(full, own);
      // i18next hands a missing key back without its namespace; the test helper's RED._ hands back what it was given.
      template = text && text !== full && text !== local ? text : null;
      templates.set(key, template);
    }
    return template === null ? inEnglish(key, values) : fill(template, values);
  };
}
