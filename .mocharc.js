// Mocha runs the compiled tests (npm test builds first). The reporter prints
// mocha's spec output and ends with "N passed, M failed" for CI. Files named on
// the command line (npx mocha dist/test/x.test.js) run alone: mocha would
// otherwise add them to the whole suite.
const named = process.argv.slice(2).some((a) => /\.test\.js$/.test(a));
module.exports = {
  spec: named ? [] : ['dist/test/**/*.test.js'],
  timeout: 20000,
  reporter: './scripts/summary-reporter.js',
  exit: true,
};
