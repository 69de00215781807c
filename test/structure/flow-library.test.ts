/**
 * The flow library's own validator (node-red-dev validate), run on this package
 * in the suite so that a scorecard regression shows before a release. Its
 * checks run as the CLI runs them (checkpackage → checknodes → checkdeps),
 * except the two that read catalogue.nodered.org (similar package names, node
 * names taken elsewhere), which cannot be reached here: the validator's own
 * HTTP client gets an empty catalogue for that host. The npm registry
 * (Node-RED versions, latest dependency majors) is asked for real.
 */
import assert from 'node:assert/strict';
import path from 'node:path';

const ROOT = path.join(__dirname, '..', '..', '..');
const LIBS = path.dirname(require.resolve('node-red-dev/src/libs/checkpackage.js', { paths: [ROOT] }));
/* eslint-disable @typescript-eslint/no-require-imports */
type Check = (dir: string, cli: object, scorecard: Record<string, { test: boolean }>, npm: false) => Promise<Record<string, { test: boolean }>>;
const checkpackage = require(path.join(LIBS, 'checkpackage.js')) as Check;
const checknodes = require(path.join(LIBS, 'checknodes.js')) as Check;
const checkdeps = require(path.join(LIBS, 'checkdeps.js')) as Check;
const validatorAxios = require(require.resolve('axios', { paths: [LIBS] })) as {
  interceptors: { request: { use(f: (c: { url?: string; adapter?: unknown }) => unknown): number; eject(id: number): void } };
};
/* eslint-enable @typescript-eslint/no-require-imports */

describe('flow library scorecard (node-red-dev validate, offline checks)', function () {
  this.timeout(60_000);

  it('every check the validator can run here passes', async () => {
    const id = validatorAxios.interceptors.request.use((config) => {
      if (config.url?.startsWith('https://catalogue.nodered.org/')) {
        config.adapter = async () => ({ data: { modules: [] }, status: 200, statusText: 'OK', headers: {}, config });
      }
      return config;
    });
    const warnings: string[] = [];
    const errors: string[] = [];
    const cli = { log: () => undefined, warn: (m: string) => warnings.push(String(m)), error: (e: unknown) => errors.push(String(e)) };
    try {
      const scorecard: Record<string, { test: boolean }> = {};
      await checkpackage(ROOT, cli, scorecard, false);
      await checknodes(ROOT, cli, scorecard, false);
      await checkdeps(ROOT, cli, scorecard, false);
      assert.deepEqual(errors, [], 'the validator could not run a check');
      assert.deepEqual(warnings, [], 'node-red-dev validate marks the package down');
      const failed = Object.entries(scorecard).filter(([, v]) => v && v.test === false).map(([k]) => k);
      assert.deepEqual(failed, []);
      // The checks that ran: a validator that silently skipped them would pass vacuously.
      for (const k of ['P01', 'P05', 'P06', 'P07', 'N01', 'D01', 'D03']) assert.ok(k in scorecard, `check ${k} ran`);
    } finally {
      validatorAxios.interceptors.request.eject(id);
    }
  });
});
