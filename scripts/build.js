#!/usr/bin/env node
// Compiles TypeScript to dist/ and copies what Node-RED loads beside the .js:
// each node's .html, the locales and the icons (Node-RED looks for
// dist/nodes/icons and dist/nodes/locales next to the node files).
'use strict';
const fs = require('fs');
const path = require('path');
const { execFileSync } = require('child_process');

const root = path.join(__dirname, '..');
const dist = path.join(root, 'dist');
fs.rmSync(dist, { recursive: true, force: true });
execFileSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', root], { stdio: 'inherit', cwd: root });

const out = path.join(dist, 'nodes');
for (const f of fs.readdirSync(path.join(root, 'nodes'))) {
  if (f.endsWith('.html')) fs.copyFileSync(path.join(root, 'nodes', f), path.join(out, f));
}
fs.cpSync(path.join(root, 'nodes', 'locales'), path.join(out, 'locales'), { recursive: true });
fs.cpSync(path.join(root, 'icons'), path.join(out, 'icons'), { recursive: true });
