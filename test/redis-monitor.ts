/**
 * Redis's MONITOR on a plain socket: every command the server runs, in the
 * order it ran them, with its arguments. ioredis's own monitor() mode can
 * fail with "Command queue state error" when MONITOR's stream starts while
 * replies are still expected, and its connection then reconnects forever;
 * a socket of our own reads the stream line by line and ends with close().
 */
import net from 'node:net';

export interface RedisMonitor {
  close(): void;
}

/** Starts MONITOR on 127.0.0.1:port (AUTH first if a password is given); resolves once Redis said OK to it. */
export function monitorRedis(port: number, password: string | undefined, onCommand: (args: string[]) => void): Promise<RedisMonitor> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let buffered = '';
    let oks = 0;
    const okWanted = password === undefined ? 1 : 2;
    socket.setEncoding('utf8');
    socket.once('error', reject);
    socket.on('connect', () => socket.write(`${password === undefined ? '' : resp(['AUTH', password])}${resp(['MONITOR'])}`));
    socket.on('data', (chunk: string) => {
      buffered += chunk;
      for (let end = buffered.indexOf('\r\n'); end >= 0; end = buffered.indexOf('\r\n')) {
        const line = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        if (line.startsWith('-')) return reject(new Error(`MONITOR refused: ${line}`));
        if (oks < okWanted && line === '+OK') {
          if (++oks === okWanted) resolve({ close: () => socket.destroy() });
          continue;
        }
        if (line.startsWith('+')) onCommand(quotedArgs(line));
      }
    });
  });
}

/** One command in RESP (any byte in any argument). */
function resp(args: string[]): string {
  return `*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`;
}

/** The quoted arguments of one MONITOR line (`+<time> [<db> <client>] "CMD" "arg" …`), escapes undone; one pass. */
function quotedArgs(line: string): string[] {
  const args: string[] = [];
  let current: string | null = null;
  for (let i = line.indexOf(']') + 1; i < line.length; i++) {
    const c = line[i];
    if (current === null) {
      if (c === '"') current = '';
      continue;
    }
    if (c === '"') {
      args.push(current);
      current = null;
    } else if (c === '\\' && i + 1 < line.length) {
      const n = line[++i];
      if (n === 'x' && i + 2 < line.length) {
        current += String.fromCharCode(parseInt(line.slice(i + 1, i + 3), 16));
        i += 2;
      } else current += n === 'n' ? '\n' : n === 'r' ? '\r' : n === 't' ? '\t' : n;
    } else current += c;
  }
  return args;
}
