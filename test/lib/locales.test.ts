import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { STATUS_KEYS } from '../../nodes/common/status';

const LOCALES = path.join(__dirname, '..', '..', '..', 'nodes', 'locales');

function keys(o: Record<string, unknown>, prefix = ''): string[] {
  return Object.entries(o).flatMap(([k, v]) => (v && typeof v === 'object' ? keys(v as Record<string, unknown>, `${prefix}${k}.`) : [`${prefix}${k}`]));
}

describe('locales', () => {
  const languages = fs.readdirSync(LOCALES);
  const files = fs.readdirSync(path.join(LOCALES, 'en-US')).filter((f) => f.endsWith('.json'));

  it('has a message catalogue and a help page for every node in en-US', () => {
    for (const n of ['charging-service', 'charging-start', 'charging-progress', 'charging-stop', 'charging-control', 'charging-metrics']) {
      assert.ok(files.includes(`${n}.json`), `${n}.json`);
      const help = fs.readFileSync(path.join(LOCALES, 'en-US', `${n}.html`), 'utf8');
      assert.match(help, new RegExp(`data-help-name="${n}"`));
      assert.match(help, /<dl class="message-properties">/);
    }
  });

  for (const lang of languages.filter((l) => l !== 'en-US')) {
    it(`${lang} has exactly the keys of en-US`, () => {
      for (const f of files) {
        const en = keys(JSON.parse(fs.readFileSync(path.join(LOCALES, 'en-US', f), 'utf8')));
        const other = keys(JSON.parse(fs.readFileSync(path.join(LOCALES, lang, f), 'utf8')));
        assert.deepEqual(other.sort(), en.sort(), `${lang}/${f}`);
      }
    });
  }

  it('every i18n key used in the editor HTML exists in en-US', () => {
    const nodesDir = path.join(LOCALES, '..');
    const known = new Set(files.flatMap((f) => keys(JSON.parse(fs.readFileSync(path.join(LOCALES, 'en-US', f), 'utf8')))));
    for (const html of fs.readdirSync(nodesDir).filter((f) => f.endsWith('.html'))) {
      const text = fs.readFileSync(path.join(nodesDir, html), 'utf8');
      const used = [...text.matchAll(/data-i18n="(?:\[[a-z]+\])?([a-z-]+\.[A-Za-z0-9.]+)"/g), ...text.matchAll(/_\('(?:@chargectl\/node-red-charging-session\/[a-z-]+:)?([a-z-]+\.[A-Za-z0-9.]+)'/g)].map((m) => m[1]);
      for (const k of used) assert.ok(known.has(k) || [...known].some((x) => x.startsWith(`${k}`)), `${html}: ${k}`);
    }
  });

  it('the status catalog has exactly the badge texts the nodes use, with the same placeholders in every language', () => {
    for (const lang of languages) {
      const catalog = JSON.parse(fs.readFileSync(path.join(LOCALES, lang, 'charging-service.json'), 'utf8'))['charging-service'].status as Record<string, unknown>;
      assert.deepEqual(keys(catalog).sort(), [...STATUS_KEYS].sort(), lang);
    }
    const text = (lang: string, key: string) =>
      key.split('.').reduce<unknown>((o, k) => (o as Record<string, unknown>)[k], JSON.parse(fs.readFileSync(path.join(LOCALES, lang, 'charging-service.json'), 'utf8'))['charging-service'].status) as string;
    for (const key of STATUS_KEYS) {
      const placeholders = (s: string) => (s.match(/__\w+__/g) ?? []).sort();
      for (const lang of languages) assert.deepEqual(placeholders(text(lang, key)), placeholders(text('en-US', key)), `${lang} ${key}`);
    }
  });
});
