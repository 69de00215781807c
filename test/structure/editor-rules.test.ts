/**
 * The editor's shared script (resources/charging-editor.js) applies the same
 * rules as the runtime: a URL the dialog accepts is one the config node
 * accepts, and the other way round. Loaded as the browser loads it, in a vm.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import vm from 'node:vm';
import { checkEndpointUrl, isLoopback } from '../../nodes/lib/settings';

interface ChargingEditor {
  isLoopback(h: string): boolean;
  urlValidator(key: string): (this: unknown, v: string, opt: unknown) => true | string;
  rangeValidator(min: number, max: number): (v: string, opt: unknown) => true | string;
}

function loadEditor(): ChargingEditor {
  const code = fs.readFileSync(path.join(__dirname, '..', '..', '..', 'resources', 'charging-editor.js'), 'utf8');
  const sandbox: Record<string, unknown> = { URL, RED: { _: (key: string) => key } };
  sandbox.window = sandbox;
  vm.runInNewContext(code, sandbox);
  return sandbox.ChargingEditor as ChargingEditor;
}

describe('editor rules equal the runtime rules (resources/charging-editor.js)', () => {
  const editor = loadEditor();

  it('has the runtime loopback rule', () => {
    for (const h of ['localhost', 'LOCALHOST', 'a.localhost', 'sim.localhost', '127.0.0.1', '127.3.2.1', '::1', '[::1]', '128.0.0.1', 'localhost.example.com', '10.0.0.1', 'example.com', '127.0.0.1.nip.io', '']) {
      assert.equal(editor.isLoopback(h), isLoopback(h), h);
    }
  });

  it('accepts and refuses the same URLs as the config node', () => {
    const validate = editor.urlValidator('baseUrl');
    for (const url of ['https://api.example.com', 'http://127.0.0.1:18080', 'http://sim.localhost:1880', 'http://[::1]:80', 'http://example.com', '127.0.0.1:18080', 'ftp://example.com', 'https://user:pw@example.com', 'not a url']) {
      let runtime = true;
      try {
        checkEndpointUrl('Base URL', url, false);
      } catch {
        runtime = false;
      }
      const dialog = validate.call({ allowInsecureHttp: false }, url, {});
      assert.equal(dialog === true, runtime, `${url}: dialog says ${String(dialog)}, runtime ${runtime ? 'accepts' : 'refuses'}`);
    }
  });

  it('its validators take two arguments, so that Node-RED shows their messages instead of ignoring them', () => {
    assert.equal(editor.urlValidator('baseUrl').length, 2);
    assert.equal(editor.rangeValidator(1, 300).length, 2);
    assert.match(String(editor.rangeValidator(1, 300)('0', {})), /charging-service\.errors\.range$/);
    assert.match(String(editor.urlValidator('baseUrl').call({}, 'http://example.com/auth', {})), /charging-service\.errors\.https$/);
  });
});
