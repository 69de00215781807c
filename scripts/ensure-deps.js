#!/usr/bin/env node
// Runs before `npm start`, `npm test` and `npm run bench`: installs the
// dependencies when node_modules is missing or older than package-lock.json, so
// that both README commands work from a clean clone. Plain JS: it must run
// before anything is installed.
'use strict';
const fs = require('fs');
const path = require('path');
const { execSync } = require('child_process');

const root = path.join(__dirname, '..');
const lock = path.join(root, 'package-lock.json');
const marker = path.join(root, 'node_modules', '.package-lock.json');

function stale() {
  if (!fs.existsSync(marker)) return true;
  if (!fs.existsSync(lock)) return false;
  return fs.statSync(lock).mtimeMs > fs.statSync(marker).mtimeMs + 1000;
}

if (stale()) {
  console.log('Installing dependencies (npm ci)…');
  execSync(fs.existsSync(lock) ? 'npm ci --no-audit --no-fund' : 'npm install --no-audit --no-fund', { cwd: root, stdio: 'inherit' });
}
