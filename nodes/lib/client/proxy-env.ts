/**
 * Which proxy the environment names for a URL, as curl reads it:
 * `https_proxy` / `HTTPS_PROXY` for https, `http_proxy` / `HTTP_PROXY` for http,
 * `all_proxy` / `ALL_PROXY` otherwise (lower case first), and `no_proxy` /
 * `NO_PROXY` for the exceptions. Replaces proxy-from-env, which matches NO_PROXY
 * entries only as host-name suffixes: a CIDR block (`10.0.0.0/8`) or an IPv6
 * address (`::1`, `[::1]:8443`) never matched, and requests meant to stay on the
 * local network went to the corporate proxy.
 *
 * NO_PROXY entries, comma or space separated:
 * - `*`: no proxy at all;
 * - a host name, `example.com` or `.example.com`: that host and its subdomains;
 * - an IP address, IPv6 with or without brackets: that address;
 * - a CIDR block, `127.0.0.0/8`, `fd00::/8`: every address in it;
 * - any of these with `:port`: only that port.
 */
import net from 'node:net';

const DEFAULT_PORTS: Record<string, number> = { 'http:': 80, 'https:': 443 };

/** The proxy URL for `url`, or '' for none. */
export function proxyForUrl(url: string, env: NodeJS.ProcessEnv = process.env): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return '';
  }
  const scheme = u.protocol.slice(0, -1);
  const proxy = envVar(env, `${scheme}_proxy`) || envVar(env, 'all_proxy');
  if (!proxy) return '';
  const host = u.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  const port = Number(u.port) || DEFAULT_PORTS[u.protocol] || 0;
  if (noProxyMatches(envVar(env, 'no_proxy'), host, port)) return '';
  // A proxy given without a scheme ("proxy:3128") is an http proxy, as curl reads it.
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(proxy) ? proxy : `http://${proxy}`;
}

function envVar(env: NodeJS.ProcessEnv, name: string): string {
  return (env[name.toLowerCase()] || env[name.toUpperCase()] || '').trim();
}

/** True when a NO_PROXY list exempts this host (no brackets, lower case) and port. */
export function noProxyMatches(noProxy: string, host: string, port: number): boolean {
  if (!noProxy) return false;
  for (const raw of noProxy.split(/[,\s]+/)) {
    const entry = raw.trim().toLowerCase();
    if (!entry) continue;
    if (entry === '*') return true;
    const { name, entryPort } = splitPort(entry);
    if (entryPort !== undefined && entryPort !== port) continue;
    if (matchesHost(name, host)) return true;
  }
  return false;
}

/** `host`, `host:port`, `[v6]`, `[v6]:port`, `v6` (a bare IPv6 address has no port), `cidr/len`. */
function splitPort(entry: string): { name: string; entryPort?: number } {
  const bracketed = /^\[([^\]]+)\](?::(\d+))?(\/\d+)?$/.exec(entry);
  if (bracketed) return { name: bracketed[1] + (bracketed[3] ?? ''), entryPort: bracketed[2] ? Number(bracketed[2]) : undefined };
  const ipPart = entry.split('/')[0];
  if (net.isIPv6(ipPart)) return { name: entry };
  const m = /^(.*):(\d+)$/.exec(entry);
  return m ? { name: m[1], entryPort: Number(m[2]) } : { name: entry };
}

function matchesHost(name: string, host: string): boolean {
  const slash = name.indexOf('/');
  if (slash >= 0) return inCidr(host, name.slice(0, slash), Number(name.slice(slash + 1)));
  if (net.isIP(name)) return net.isIP(host) !== 0 && sameAddress(name, host);
  const suffix = name.replace(/^\*?\./, '');
  return host === suffix || host.endsWith(`.${suffix}`);
}

function sameAddress(a: string, b: string): boolean {
  const x = toBytes(a);
  const y = toBytes(b);
  return !!x && !!y && x.length === y.length && x.every((v, i) => v === y[i]);
}

function inCidr(host: string, base: string, bits: number): boolean {
  const h = toBytes(host);
  const b = toBytes(base);
  if (!h || !b || h.length !== b.length || !Number.isInteger(bits) || bits < 0 || bits > h.length * 8) return false;
  for (let i = 0; i < h.length; i++) {
    const take = Math.max(0, Math.min(8, bits - i * 8));
    const mask = take === 0 ? 0 : (0xff << (8 - take)) & 0xff;
    if ((h[i] & mask) !== (b[i] & mask)) return false;
  }
  return true;
}

/** An address as bytes (4 or 16), or undefined when it is not an IP address. */
function toBytes(addr: string): number[] | undefined {
  if (net.isIPv4(addr)) return addr.split('.').map(Number);
  if (!net.isIPv6(addr)) return undefined;
  let s = addr;
  // An IPv4 tail (::ffff:1.2.3.4) as two groups.
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(s);
  if (v4) {
    const p = v4[1].split('.').map(Number);
    s = s.slice(0, -v4[1].length) + `${((p[0] << 8) | p[1]).toString(16)}:${((p[2] << 8) | p[3]).toString(16)}`;
  }
  const [left, right] = s.includes('::') ? s.split('::') : [s, undefined];
  const l = left ? left.split(':') : [];
  const r = right ? right.split(':') : [];
  const groups = right === undefined ? l : [...l, ...Array<string>(8 - l.length - r.length).fill('0'), ...r];
  const bytes: number[] = [];
  for (const g of groups) {
    const n = parseInt(g || '0', 16);
    bytes.push(n >> 8, n & 0xff);
  }
  return bytes.length === 16 ? bytes : undefined;
}
