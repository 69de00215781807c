/**
 * Which proxy the environment names for a URL, as curl reads it:
 * `https_proxy` / `HTTPS_PROXY` for https, `http_proxy` / `HTTP_PROXY` for http,
 * `all_proxy` / `ALL_PROXY` otherwise (lower case first), and `no_proxy` /
 * `NO_PROXY` for the exceptions; and whether we can use it (proxySettings).
 * Replaces proxy-from-env, which matches NO_PROXY entries only as host-name
 * suffixes: a CIDR block (`10.0.0.0/8`) or an IPv6 address (`::1`, `[::1]:8443`)
 * never matched, and requests meant to stay on the local network went to the
 * corporate proxy.
 *
 * NO_PROXY entries, comma or space separated:
 * - `*`: no proxy at all;
 * - a host name, `example.com` or `.example.com`: that host and its subdomains
 *   (a trailing dot, the DNS root, is ignored on either side);
 * - an IP address, IPv6 with or without brackets: that address;
 * - a CIDR block, `127.0.0.0/8`, `fd00::/8`: every address in it, IPv4-mapped
 *   IPv6 addresses (`[::ffff:10.0.0.1]`) included (Node's net.BlockList);
 * - any of these with `:port`: only that port.
 * An entry that cannot mean anything (`10.1.2.3/33`) is reported, not ignored in silence.
 */
import net from 'node:net';
import { ChargingError } from '../errors';

const DEFAULT_PORTS: Record<string, number> = { 'http:': 80, 'https:': 443 };

/** A proxy to use and where it was named (for messages: never the URL itself, which may carry a password). */
export interface ProxyChoice {
  url: string;
  /** the environment variable (HTTPS_PROXY, all_proxy, ...) or "the proxy setting" */
  from: string;
}

/** The proxy URL for `url`, or '' for none. */
export function proxyForUrl(url: string, env: NodeJS.ProcessEnv = process.env, onWarning?: (text: string) => void): string {
  return proxyChoice(url, env, onWarning)?.url ?? '';
}

/** The proxy the environment names for `url` and the variable that named it, or null for none. */
export function proxyChoice(url: string, env: NodeJS.ProcessEnv = process.env, onWarning?: (text: string) => void): ProxyChoice | null {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return null;
  }
  const scheme = u.protocol.slice(0, -1);
  const named = envVar(env, `${scheme}_proxy`) ?? envVar(env, 'all_proxy');
  if (!named) return null;
  const host = u.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  const port = Number(u.port) || DEFAULT_PORTS[u.protocol] || 0;
  if (noProxyMatches(envVar(env, 'no_proxy')?.value ?? '', host, port, onWarning)) return null;
  // A proxy given without a scheme ("proxy:3128") is an http proxy, as curl reads it.
  return { url: /^[a-z][a-z0-9+.-]*:\/\//i.test(named.value) ? named.value : `http://${named.value}`, from: named.name };
}

function envVar(env: NodeJS.ProcessEnv, name: string): { name: string; value: string } | undefined {
  for (const n of [name.toLowerCase(), name.toUpperCase()]) {
    const value = (env[n] ?? '').trim();
    if (value) return { name: n, value };
  }
  return undefined;
}

/** A proxy as the agents use it: where it is, and its credentials decoded once. */
export interface ProxySettings {
  protocol: 'http:' | 'https:';
  /** without brackets for IPv6 */
  hostname: string;
  port: number;
  /** scheme://host:port, for messages (never the credentials) */
  where: string;
  /** `Basic <base64>` when the URL carries credentials */
  authorization?: string;
  /** every form the credentials take on the wire, for the redactor */
  secrets: string[];
}

/**
 * Reads a proxy URL; throws a CONFIG error naming `from` (never the URL: it may
 * carry a password) for a scheme we cannot speak (socks5h://: HTTP CONNECT sent
 * to a SOCKS port would fail with nonsense) or credentials that are not valid
 * percent-encoding (`user:50%off@`: a literal % must be written %25).
 */
export function proxySettings(proxy: string, from = 'the proxy setting'): ProxySettings {
  let url: URL;
  try {
    url = new URL(proxy);
  } catch {
    throw new ChargingError('CONFIG', `${from} is not a valid proxy URL (write http://user:password@host:port)`);
  }
  const where = `${url.protocol}//${url.host}`;
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ChargingError('CONFIG', `${from} names a ${url.protocol}// proxy (${url.host}): only http:// and https:// proxies are supported. Name an HTTP proxy, or list the service's host in NO_PROXY`);
  }
  let user: string;
  let password: string;
  try {
    user = decodeURIComponent(url.username);
    password = decodeURIComponent(url.password);
  } catch {
    throw new ChargingError('CONFIG', `The user or password in ${from} (proxy ${where}) is not valid percent-encoding: write a literal % as %25 (and @ : / as %40 %3A %2F)`);
  }
  const hostname = url.hostname.replace(/^\[|\]$/g, '');
  const port = Number(url.port) || DEFAULT_PORTS[url.protocol];
  if (!user && !password) return { protocol: url.protocol, hostname, port, where, secrets: [] };
  const basic = Buffer.from(`${user}:${password}`).toString('base64');
  // The password as written in the URL too: its own percent-encoding may differ from encodeURIComponent's.
  const secrets = [password, url.password, `${user}:${password}`, basic].filter((s) => s !== '');
  return { protocol: url.protocol, hostname, port, where, authorization: `Basic ${basic}`, secrets };
}

/** True when a NO_PROXY list exempts this host (no brackets, lower case) and port. */
export function noProxyMatches(noProxy: string, host: string, port: number, onWarning?: (text: string) => void): boolean {
  if (!noProxy) return false;
  const name = stripDot(host);
  for (const raw of noProxy.split(/[,\s]+/)) {
    const entry = raw.trim().toLowerCase();
    if (!entry) continue;
    if (entry === '*') return true;
    const { pattern, entryPort } = splitPort(entry);
    if (entryPort !== undefined && entryPort !== port) continue;
    const match = matchesHost(pattern, name);
    if (match === 'invalid') onWarning?.(`NO_PROXY entry "${entry.slice(0, 60)}" is not a host name, an IP address or a CIDR block (such as 10.0.0.0/8); it is ignored`);
    else if (match) return true;
  }
  return false;
}

/** `host`, `host:port`, `[v6]`, `[v6]:port`, `v6` (a bare IPv6 address has no port), `cidr/len`. */
function splitPort(entry: string): { pattern: string; entryPort?: number } {
  const bracketed = /^\[([^\]]+)\](?::(\d+))?(\/\d+)?$/.exec(entry);
  if (bracketed) return { pattern: bracketed[1] + (bracketed[3] ?? ''), entryPort: bracketed[2] ? Number(bracketed[2]) : undefined };
  const ipPart = entry.split('/')[0];
  if (net.isIPv6(ipPart)) return { pattern: entry };
  const m = /^(.*):(\d+)$/.exec(entry);
  return m ? { pattern: m[1], entryPort: Number(m[2]) } : { pattern: entry };
}

function matchesHost(pattern: string, host: string): boolean | 'invalid' {
  const slash = pattern.indexOf('/');
  if (slash >= 0 || net.isIP(pattern)) {
    const base = slash >= 0 ? pattern.slice(0, slash) : pattern;
    const family = net.isIP(base);
    const bits = slash >= 0 ? Number(pattern.slice(slash + 1)) : family === 4 ? 32 : 128;
    if (!family || !/^\d+$/.test(String(bits)) || bits > (family === 4 ? 32 : 128)) return 'invalid';
    const hostFamily = net.isIP(host);
    if (!hostFamily) return false;
    const list = new net.BlockList();
    list.addSubnet(base, bits, family === 4 ? 'ipv4' : 'ipv6');
    return list.check(host, hostFamily === 4 ? 'ipv4' : 'ipv6');
  }
  const suffix = stripDot(pattern.replace(/^\*?\./, ''));
  if (!/^[a-z0-9_-]+(\.[a-z0-9_-]+)*$/.test(suffix)) return 'invalid';
  return host === suffix || host.endsWith(`.${suffix}`);
}

function stripDot(name: string): string {
  return name.endsWith('.') ? name.slice(0, -1) : name;
}
