/**
 * Certificates for the TLS failure tests, made at test time with openssl (EC keys: fast):
 * a private CA; a server certificate for 127.0.0.1 signed by it; the same expired; one for
 * another host name; a client certificate signed by the CA.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export interface TestCerts {
  caCert: Buffer;
  caKey: Buffer;
  serverKey: Buffer;
  serverCert: Buffer;
  expiredCert: Buffer;
  wrongNameCert: Buffer;
  clientKey: Buffer;
  clientCert: Buffer;
  dir: string;
}

let cached: TestCerts | null = null;

export function testCerts(): TestCerts {
  if (cached) return cached;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'charging-tls-'));
  const f = (name: string) => path.join(dir, name);
  const ssl = (...args: string[]) => execFileSync('openssl', args, { stdio: 'pipe' });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  ssl('req', '-x509', ...ec, '-keyout', f('ca.key'), '-out', f('ca.pem'), '-days', '2', '-subj', '/CN=Charging Test CA');
  const sign = (name: string, cn: string, san: string | null, days: string) => {
    ssl('req', ...ec, '-keyout', f(`${name}.key`), '-out', f(`${name}.csr`), '-subj', `/CN=${cn}`);
    const ext = f(`${name}.ext`);
    fs.writeFileSync(ext, san ? `subjectAltName=${san}\n` : 'basicConstraints=CA:FALSE\n');
    // -days -1: valid until yesterday, so "expired" needs no clock tricks.
    ssl('x509', '-req', '-in', f(`${name}.csr`), '-CA', f('ca.pem'), '-CAkey', f('ca.key'), '-set_serial', String(Math.floor(Math.random() * 1e9)), '-days', days, '-extfile', ext, '-out', f(`${name}.pem`));
  };
  sign('server', 'localhost', 'IP:127.0.0.1,DNS:localhost', '2');
  ssl('x509', '-req', '-in', f('server.csr'), '-CA', f('ca.pem'), '-CAkey', f('ca.key'), '-set_serial', '7', '-days', '-1', '-extfile', f('server.ext'), '-out', f('expired.pem'));
  ssl('x509', '-req', '-in', f('server.csr'), '-CA', f('ca.pem'), '-CAkey', f('ca.key'), '-set_serial', '8', '-days', '2', '-out', f('wrongname.pem'), '-extfile', writeExt(f('wrongname.ext'), 'DNS:service.example.org'));
  sign('client', 'charging-client', null, '2');
  const r = (n: string) => fs.readFileSync(f(n));
  cached = {
    caCert: r('ca.pem'),
    caKey: r('ca.key'),
    serverKey: r('server.key'),
    serverCert: r('server.pem'),
    expiredCert: r('expired.pem'),
    wrongNameCert: r('wrongname.pem'),
    clientKey: r('client.key'),
    clientCert: r('client.pem'),
    dir,
  };
  return cached;
}

function writeExt(file: string, san: string): string {
  fs.writeFileSync(file, `subjectAltName=${san}\n`);
  return file;
}
