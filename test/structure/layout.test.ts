/**
 * The house rules of the layout (docs/architecture.md), checked on the sources:
 * data flows one way (node -> common -> lib, never back), nodes/lib knows no
 * Node-RED, node files stay thin, no function grows past 60 lines, no file
 * past 400, and comments say why rather than which issue asked.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

const ROOT = path.join(__dirname, '..', '..', '..');
const NODES = path.join(ROOT, 'nodes');

function files(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(path.join(dir, e.name)) : [path.join(dir, e.name)]));
}

/** The comments of a TypeScript source, each with its line (1-based): those before and after every node of its syntax tree. */
function comments(file: string): Array<{ line: number; text: string }> {
  const text = fs.readFileSync(file, 'utf8');
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.ES2022, true);
  const found = new Map<number, { line: number; text: string }>();
  const add = (ranges: ts.CommentRange[] | undefined) => {
    for (const r of ranges ?? []) found.set(r.pos, { line: sf.getLineAndCharacterOfPosition(r.pos).line + 1, text: text.slice(r.pos, r.end) });
  };
  const visit = (n: ts.Node) => {
    add(ts.getLeadingCommentRanges(text, n.pos));
    add(ts.getTrailingCommentRanges(text, n.end));
    n.getChildren(sf).forEach(visit);
  };
  visit(sf);
  return [...found.values()];
}

/** "issue 36", "issues 17", "(issue", "#19", "#19.1": a reference a newcomer cannot look up. */
const CITES_ISSUE = /\b[Ii]ssues? ?#?\d+|\(issue|(?<![\w&])#\d+\b/;

function sources(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) return sources(full);
    return e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [full] : [];
  });
}

const rel = (f: string) => path.relative(ROOT, f);
const imports = (file: string) => [...fs.readFileSync(file, 'utf8').matchAll(/(?:from|require\()\s*'([^']+)'/g)].map((m) => m[1]);

describe('layout of nodes/ (docs/architecture.md)', () => {
  const all = sources(NODES);

  it('nodes/lib imports neither Node-RED nor nodes/common, and nodes/common never imports a node file', () => {
    for (const f of all.filter((x) => x.includes(`${path.sep}lib${path.sep}`))) {
      for (const i of imports(f)) {
        assert.ok(!/node-red|\/common\//.test(i), `${rel(f)} imports ${i}`);
        assert.ok(!/^\.\.\/\.\.\/charging-|^\.\.\/charging-/.test(i), `${rel(f)} imports a node: ${i}`);
      }
    }
    for (const f of all.filter((x) => x.includes(`${path.sep}common${path.sep}`))) {
      for (const i of imports(f)) assert.ok(!/charging-/.test(i), `${rel(f)} imports a node file: ${i}`);
    }
  });

  it('node files stay thin: at most 100 lines each', () => {
    for (const f of all.filter((x) => path.dirname(x) === NODES)) {
      const lines = fs.readFileSync(f, 'utf8').split('\n').length;
      assert.ok(lines <= 100, `${rel(f)} has ${lines} lines`);
    }
  });

  it('no function in nodes/ is longer than 60 lines', () => {
    const long: string[] = [];
    for (const f of all) {
      const text = fs.readFileSync(f, 'utf8');
      const sf = ts.createSourceFile(f, text, ts.ScriptTarget.ES2022, true);
      const visit = (n: ts.Node) => {
        if (ts.isFunctionLike(n) && 'body' in n && n.body) {
          const start = sf.getLineAndCharacterOfPosition(n.getStart(sf)).line;
          const end = sf.getLineAndCharacterOfPosition(n.getEnd()).line;
          // A node's registration function holds its constructor; the constructor is what is measured.
          const isRegister = ts.isFunctionExpression(n) && n.name?.text === 'register';
          if (end - start + 1 > 60 && !isRegister) long.push(`${rel(f)}:${start + 1} (${end - start + 1} lines)`);
        }
        ts.forEachChild(n, visit);
      };
      visit(sf);
    }
    assert.deepEqual(long, []);
  });

  it('no file under nodes/ is longer than 400 lines', () => {
    const long = files(NODES)
      .map((f) => ({ f, lines: fs.readFileSync(f, 'utf8').split('\n').length }))
      .filter((x) => x.lines > 400)
      .map((x) => `${rel(x.f)} (${x.lines} lines)`);
    assert.deepEqual(long, []);
  });

  it('no comment under nodes/ cites an issue number: it says why instead', () => {
    const citing: string[] = [];
    for (const f of all) {
      const name = rel(f).split(path.sep).join('/');
      for (const c of comments(f)) if (CITES_ISSUE.test(c.text)) citing.push(`${name}:${c.line} ${c.text.match(CITES_ISSUE)?.[0]}`);
    }
    // The help and the labels are read by users, who cannot look an issue up either.
    for (const f of files(NODES).filter((x) => /\.(html|json)$/.test(x))) {
      if (/[Ii]ssues? ?#?\d+|\(issue/.test(fs.readFileSync(f, 'utf8'))) citing.push(rel(f));
    }
    assert.deepEqual(citing, []);
  });

  it('nodes/common is glue: every file there talks to Node-RED', () => {
    const plain = all.filter((f) => f.includes(`${path.sep}common${path.sep}`) && !imports(f).includes('node-red'));
    assert.deepEqual(plain.map(rel), []);
  });

  it('one coordination seam: outside nodes/lib, nothing holds a Fleet or asks whether replicas are coordinated', () => {
    const asking: string[] = [];
    // The registry opens the fleets (and loads ioredis only then): the one place that knows which Coordination a configuration gets.
    for (const f of all.filter((x) => !x.includes(`${path.sep}lib${path.sep}`) && !x.endsWith('coordination-registry.ts'))) {
      const text = fs.readFileSync(f, 'utf8');
      // Types, the key naming and the URL's reading (plain functions, no Redis client) are allowed; anything that runs the fleet is not.
      for (const m of text.matchAll(/^import (?!type )[^;]*from '[^']*\/lib\/fleet\/(?!redis\/(?:keys|url)')[^']*'/gm)) asking.push(`${rel(f)}: ${m[0]}`);
      for (const m of text.matchAll(/getFleet|if \(this\.fleet|fleet \?|instanceof \w*Store|Fleet \| null|new (?:Fleet|RedisCoordination)\b/g)) asking.push(`${rel(f)}: ${m[0]}`);
    }
    assert.deepEqual(asking, []);
  });
});

describe('what the package ships', () => {
  const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { engines: { node: string }; files: string[] };

  it('source maps carry their sources (the .ts files are not shipped), so a stack trace in a user\'s log points at real lines', () => {
    const walk = (dir: string): string[] =>
      fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(path.join(dir, e.name)) : e.name.endsWith('.js.map') ? [path.join(dir, e.name)] : []));
    const files = [...walk(path.join(ROOT, 'dist', 'nodes')), ...walk(path.join(ROOT, 'dist', 'simulator'))];
    assert.ok(files.length > 10, `maps found: ${files.length}`);
    for (const f of files) {
      const map = JSON.parse(fs.readFileSync(f, 'utf8')) as { sources: string[]; sourcesContent?: Array<string | null> };
      assert.equal(map.sourcesContent?.length, map.sources.length, `${rel(f)} has its sources inline`);
      assert.ok(map.sourcesContent?.every((s) => typeof s === 'string' && s.length > 0), rel(f));
    }
    assert.ok(!pkg.files.some((f) => /^nodes\b|\.ts$/.test(f)), 'the TypeScript sources are not in "files"');
  });

  it('engines says the Node.js the tests run on, and the README says the same', () => {
    assert.equal(pkg.engines.node, '>=20');
    assert.ok(Number(process.versions.node.split('.')[0]) >= 20);
    const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    assert.match(readme, /Node\.js 20 or newer/);
    assert.doesNotMatch(readme, /Node\.js 18/);
  });
});
