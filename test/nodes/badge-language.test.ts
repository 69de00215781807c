/**
 * A node's badge speaks the language of its own runtime: the RED its node set
 * was registered with, not whichever runtime last registered charging-service
 * in the process, and not only once charging-service has been registered.
 * The runtime's RED._ is Node-RED's own i18next with the runtime's options and
 * our catalogs in the charging-service node set's namespace (the test helper's
 * RED._ hands every key back, so it has no language to show).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import type { NodeAPI } from 'node-red';
import { FlowNode, flowFor, fromNodeRed, helper, NODES, runtimeSuite, send, statusCalls, until } from '../harness';

const MODULE = '@chargectl/node-red-charging-session';
const SETS = ['charging-service', 'charging-start', 'charging-progress', 'charging-stop', 'charging-control'];
const LOCALES = path.join(__dirname, '..', '..', 'nodes', 'locales');

type Translate = NodeAPI['_'];
type Register = (RED: NodeAPI) => void;

/** Node-RED's i18next set up as @node-red/util's i18n sets it up, in `lang`, with the catalogs of every node set of ours. */
async function runtimeLanguage(lang: string): Promise<(namespace: string) => Translate> {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const i18next = require(fromNodeRed('i18next')) as { createInstance(): { init(o: object): Promise<unknown>; t(k: string, v?: object): string } };
  const resources: Record<string, Record<string, unknown>> = {};
  for (const l of ['en-US', 'de']) {
    resources[l] = {};
    for (const set of SETS) resources[l][`${MODULE}/${set}`] = JSON.parse(fs.readFileSync(path.join(LOCALES, l, `${set}.json`), 'utf8'));
  }
  const i18n = i18next.createInstance();
  await i18n.init({ lng: lang, fallbackLng: 'en-US', resources, defaultNS: 'runtime', keySeparator: '.', nsSeparator: ':', interpolation: { escapeValue: false, prefix: '__', suffix: '__' }, showSupportNotice: false });
  // RED._ of one node set: a key without a namespace is looked up in the set's own (registry createNodeApi).
  return (namespace) => ((key: string, values?: object) => i18n.t(key.includes(':') ? key : `${namespace}:${key}`, values)) as Translate;
}

/** Each node set registered with a RED of its own whose RED._ speaks `speak`'s language, as the runtime hands every set its own. */
function inRuntime(speak: (namespace: string) => Translate, sets: Register[], names: string[]): Register[] {
  return sets.map((register, i) => (RED: NodeAPI) => register(Object.assign(Object.create(RED) as NodeAPI, { _: speak(`${MODULE}/${names[i]}`) })));
}

const badges = (id: string) => statusCalls(id).map((s) => String(s.text));

describe('badges in the language of the node\'s own runtime', function () {
  const rt = runtimeSuite();

  it('a German runtime that never registered charging-service: the badge is German', async () => {
    const german = await runtimeLanguage('de');
    const progress = NODES[SETS.indexOf('charging-progress')] as Register;
    const flow: FlowNode[] = [{ id: 'q', type: 'charging-progress', service: 'absent', wires: [[]] }];
    await helper.load(inRuntime(german, [progress], ['charging-progress']), flow);
    send('q', { payload: { token: 'RFID-1' } });
    await until(() => badges('q').some((t) => t.startsWith('Fehler')), `a red badge (${badges('q').join(', ')})`);
    assert.ok(badges('q').includes('Fehler: Konfiguration'), badges('q').join(', '));
  });

  it('a second runtime registering charging-service in English leaves a German runtime\'s badges German', async () => {
    const [german, english] = await Promise.all([runtimeLanguage('de'), runtimeLanguage('en-US')]);
    const { flow, credentials } = flowFor(rt.sim, [{ id: 'q', type: 'charging-progress', service: 'svc', wires: [[]] }]);
    await helper.load(inRuntime(german, NODES as Register[], SETS), flow, credentials);
    // Another runtime in the process (its own registry and admin routes; here they go nowhere) registers its config node.
    const register = NODES[0] as Register;
    register({ _: english(`${MODULE}/charging-service`), nodes: { registerType: () => undefined }, httpAdmin: { post: () => undefined }, auth: { needsPermission: () => undefined } } as unknown as NodeAPI);
    send('q', { payload: { token: 'NOBODY' } });
    await until(() => badges('q').some((t) => t.startsWith('keine Sitzung') || t.startsWith('no session')), `the answer's badge (${badges('q').join(', ')})`);
    assert.ok(badges('q').includes('frage ab…'), badges('q').join(', '));
    assert.match(badges('q').at(-1) ?? '', /^keine Sitzung · \d\d:\d\d:\d\d$/);
  });
});
