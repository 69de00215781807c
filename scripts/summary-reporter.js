// Mocha's spec reporter, plus a closing "N passed, M failed" line (the form CI
// reads) and the same counts in dist/test-summary.json for .ci/run.
'use strict';
const fs = require('fs');
const path = require('path');
const Mocha = require('mocha');

class SummaryReporter extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    runner.once('end', () => {
      const s = runner.stats || { passes: 0, failures: 0, pending: 0 };
      const line = `${s.passes} passed, ${s.failures} failed` + (s.pending ? `, ${s.pending} skipped` : '');
      const file = process.env.CHARGING_TEST_SUMMARY || path.join(__dirname, '..', 'dist', 'test-summary.json');
      try {
        fs.mkdirSync(path.dirname(file), { recursive: true });
        fs.writeFileSync(file, JSON.stringify({ passes: s.passes, failures: s.failures, pending: s.pending }));
      } catch (e) {
        console.error(`could not write ${file}: ${e.message}`);
      }
      process.stdout.write(`\n${line}\n`);
    });
  }
}
module.exports = SummaryReporter;
