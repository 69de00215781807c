/**
 * The README against the code, side by side: every setting and default its
 * tables name is one of the node's editor defaults with that value, every
 * msg property a node's section names is in that node's help, every error
 * code it names is one errors.ts defines (and the Errors table has them all),
 * every document and picture it links exists, and it stays a front page
 * (at most 300 lines). The help links only documents a user can open.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import vm from 'node:vm';

const ROOT = path.join(__dirname, '..', '..', '..');
const read = (...p: string[]) => fs.readFileSync(path.join(ROOT, ...p), 'utf8');
const README = read('README.md');
/** Every node the package registers: each needs its section. */
const NODES = Object.keys((JSON.parse(read('package.json')) as { 'node-red': { nodes: Record<string, string> } })['node-red'].nodes);
const REPO_FILE = 'https://github.com/chargectl/node-red-charging-session/blob/main/';
const REPO_RAW = 'https://raw.githubusercontent.com/chargectl/node-red-charging-session/main/';

interface Definition {
  defaults: Record<string, { value: unknown }>;
  credentials?: Record<string, unknown>;
}

/** A node's registerType definition as the editor gets it: its .html script run in a vm, with the real shared editor script. */
function editorDefinition(type: string): Definition {
  let def: Definition | undefined;
  const validator = () => () => true;
  const RED = { _: (key: string) => key, validators: { typedInput: validator, number: validator, regex: validator }, nodes: { registerType: (_t: string, d: Definition) => (def = d) } };
  const sandbox: Record<string, unknown> = { RED, URL };
  sandbox.window = sandbox;
  vm.runInNewContext(read('resources', 'charging-editor.js'), sandbox);
  const script = /<script type="text\/javascript">([\s\S]*?)<\/script>/.exec(read('nodes', `${type}.html`))?.[1] ?? '';
  vm.runInNewContext(script, sandbox);
  assert.ok(def, `${type}.html registers its type`);
  return def;
}

/** The README's sections, by heading: `### \`charging-start\`` is charging-start's. */
function sections(): Map<string, string> {
  const out = new Map<string, string>();
  const parts = README.split(/^(?=#{2,3} )/m);
  for (const part of parts) {
    const m = /^#{2,3} `(charging-[a-z]+(?:-[a-z]+)*)`/.exec(part);
    if (m) out.set(m[1], part);
  }
  return out;
}

/** The rows of every table in `text` whose first header cell is `header`, as arrays of cells. */
function tableRows(text: string, header: string): string[][] {
  const rows: string[][] = [];
  let inside = false;
  for (const line of text.split('\n')) {
    if (!line.startsWith('|')) {
      inside = false;
      continue;
    }
    const cells = line.slice(1, line.endsWith('|') ? -1 : undefined).split('|').map((c) => c.trim());
    if (!inside && cells[0] === header) inside = true;
    else if (inside && !/^-+$/.test(cells[0])) rows.push(cells);
  }
  return rows;
}

const backticked = (cell: string) => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]);

/** A default as the README writes it: `10 s` or `32` → 10, 32; empty / default store → ''; off/on; `x` → 'x'. */
function readmeDefault(text: string): unknown {
  const t = text.trim();
  if (t === 'empty' || t === 'default store') return '';
  if (t === 'off') return false;
  if (t === 'on') return true;
  const n = /^(\d+(?:\.\d+)?)( s)?$/.exec(t);
  if (n) return Number(n[1]);
  const code = /^`([^`]*)`$/.exec(t);
  if (code) return code[1];
  throw new Error(`the README's default "${t}" is none of: N, N s, empty, default store, off, on, \`value\``);
}

describe('README against the code', () => {
  const byNode = sections();

  it('is a front page: at most 300 lines', () => {
    const lines = README.split('\n').length - (README.endsWith('\n') ? 1 : 0);
    assert.ok(lines <= 300, `README has ${lines} lines`);
  });

  it('has a section for every node', () => {
    assert.deepEqual([...byNode.keys()].sort(), [...NODES].sort());
  });

  for (const type of NODES) {
    it(`${type}: every setting and default the README names is the node's`, () => {
      const def = editorDefinition(type);
      const rows = tableRows(byNode.get(type) ?? '', 'setting');
      // A node with no setting but its name needs no table.
      if (Object.keys(def.defaults).every((k) => k === 'name')) return assert.equal(rows.length, 0, `no settings table for ${type}: it has none`);
      assert.ok(rows.length > 0, `a settings table for ${type}`);
      for (const [nameCell, defaultCell] of rows) {
        const names = backticked(nameCell);
        assert.ok(names.length > 0, `a property name in \`\` in "${nameCell}"`);
        const defaults = defaultCell.split(/,\s*/);
        names.forEach((name, i) => {
          const expected = readmeDefault(defaults.length === names.length ? defaults[i] : defaultCell);
          if (def.credentials && name in def.credentials) {
            assert.equal(expected, '', `${type}.${name} is a credential: no default but empty`);
            return;
          }
          assert.ok(name in def.defaults, `the README names ${type} setting ${name}, which the node's defaults do not have`);
          // A configuration-node reference (tls) has no value: empty.
          const actual = def.defaults[name].value ?? '';
          const same = typeof expected === 'number' ? Number(actual) === expected && String(actual).trim() !== '' : actual === expected;
          assert.ok(same, `${type}.${name}: README says ${JSON.stringify(expected)}, the node's default is ${JSON.stringify(actual)}`);
        });
      }
    });

    it(`${type}: every msg property its section names is in the node's help`, () => {
      const help = read('nodes', 'locales', 'en-US', `${type}.html`);
      const props = new Set([...(byNode.get(type) ?? '').matchAll(/msg\.([A-Za-z]+)/g)].map((m) => m[1]));
      for (const p of props) {
        assert.match(help, new RegExp(`<dt[^>]*>\\s*${p}\\b|msg\\.${p}\\b`), `README names msg.${p} for ${type}; its help does not`);
      }
    });
  }

  it('names only error codes errors.ts defines, and its Errors table has them all', () => {
    const source = read('nodes', 'lib', 'errors.ts');
    // The union's members, one a line: `  | 'CODE' // what it means`.
    const union = source.slice(source.indexOf('type ChargingErrorCode ='));
    const codes = new Set([...union.matchAll(/^\s*\| '([A-Z_]+)'/gm)].map((m) => m[1]));
    assert.ok(codes.size >= 10, 'errors.ts read');
    const tabled = new Set(tableRows(README, 'code').flatMap((r) => backticked(r[0])));
    assert.deepEqual([...tabled].sort(), [...codes].sort(), 'the Errors table lists exactly the codes of errors.ts');
    // Anywhere else: a word in capitals in `` is a code, but for the commands, UTC and environment variables.
    const words = backticked(README).filter((w) => /^[A-Z]+(?:_[A-Z]+)*$/.test(w) && !['START', 'STOP', 'UTC'].includes(w) && !/^CHARGING_|_PROXY$/.test(w));
    for (const w of words) assert.ok(codes.has(w), `README names error code ${w}, which errors.ts does not define`);
  });

  it('links documents and pictures that exist in the repository', () => {
    const links = [...README.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]);
    const local = links.filter((l) => l.startsWith(REPO_FILE) || l.startsWith(REPO_RAW)).map((l) => l.replace(REPO_FILE, '').replace(REPO_RAW, '').replace(/#.*$/, ''));
    assert.ok(local.some((l) => l.startsWith('docs/images/')), 'a picture');
    for (const file of local) assert.ok(fs.existsSync(path.join(ROOT, file)), `README links ${file}, which is not in the repository`);
    const relative = links.filter((l) => !/^(https?:|#)/.test(l));
    assert.deepEqual(relative, [], 'links from the README work on npm and the flow library too: absolute, into the repository');
  });

  it('the help links only documents a user can open', () => {
    for (const type of NODES) {
      const help = read('nodes', 'locales', 'en-US', `${type}.html`);
      assert.doesNotMatch(help, /in the package/, `${type}: the docs are not shipped in the package`);
      // A document named without a link cannot be opened from the editor.
      const unlinked = help.replace(/<a [^>]*>[\s\S]*?<\/a>/g, '');
      assert.doesNotMatch(unlinked, /docs\/[\w-]+\.md/, `${type}: a document cited without a link into the repository`);
      for (const m of help.matchAll(/href="([^"]+)"/g)) {
        assert.match(m[1], /^https:\/\//, `${type}: a link a user can open`);
        if (m[1].startsWith(REPO_FILE)) assert.ok(fs.existsSync(path.join(ROOT, m[1].replace(REPO_FILE, '').replace(/#.*$/, ''))), `${type} links ${m[1]}`);
      }
    }
  });
});
