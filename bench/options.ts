/**
 * The command line of `npm run bench` (see bench/run.ts): which sections run,
 * and whether it is a smoke run. Read by the sections for their sizes.
 */

/** fewer rounds and messages (a smoke run; results not written) */
export const QUICK = process.argv.includes('--quick');
/** only the watch-mode sections (adding tokens, polling side by side with bare axios) */
export const WATCH_ONLY = process.argv.includes('--watch');
/** only the progress-query throughput section (printed only: to compare two builds run one after the other) */
export const THROUGHPUT_ONLY = process.argv.includes('--throughput');
/** only the coordination section (bench/fleet.ts) */
export const FLEET_ONLY = process.argv.includes('--fleet');
/** only the ledger section (bench/ledger.ts) */
export const LEDGER_ONLY = process.argv.includes('--ledger');
/** only the metrics section (bench/metrics.ts) */
export const METRICS_ONLY = process.argv.includes('--metrics');
/** only the depot section (bench/depot.ts) */
export const DEPOT_ONLY = process.argv.includes('--depot');
