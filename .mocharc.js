// Mocha runs the compiled tests (npm test builds first). The reporter prints
// mocha's spec output and ends with "N passed, M failed" for CI.
module.exports = {
  spec: ['dist/test/**/*.test.js'],
  timeout: 20000,
  reporter: './scripts/summary-reporter.js',
  exit: true,
};
