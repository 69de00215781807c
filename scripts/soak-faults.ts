/**
 * The soak's hostile world, shared by its rotations (scripts/soak.ts: commands;
 * scripts/soak-control.ts: charging-control): the faults injected at random, a
 * repeatable random source, and the injector that keeps the world flaky rather
 * than dead.
 */
import type { ChargingServiceSimulator, FaultRule } from '../simulator/simulator';

/** Small deterministic PRNG (mulberry32) so a run can be repeated. */
export function rng(seed: number): () => number {
  let t = seed >>> 0;
  return () => {
    t += 0x6d2b79f5;
    let r = Math.imul(t ^ (t >>> 15), 1 | t);
    r ^= r + Math.imul(r ^ (r >>> 7), 61 | r);
    return ((r ^ (r >>> 14)) >>> 0) / 4294967296;
  };
}

export const FAULTS: Array<[string, FaultRule]> = [
  ['GET 503', { target: 'get', kind: 'status', status: 503, times: 3 }],
  ['GET 500 with body', { target: 'get', kind: 'status', status: 500, body: '{"message":"db down"}', times: 2 }],
  ['GET reset', { target: 'get', kind: 'reset', times: 2 }],
  ['GET hang', { target: 'get', kind: 'hang', times: 1 }],
  ['GET truncated', { target: 'get', kind: 'truncated', times: 1 }],
  ['GET malformed', { target: 'get', kind: 'malformed', times: 1 }],
  ['GET 429', { target: 'get', kind: 'status', status: 429, headers: { 'Retry-After': '0' }, times: 3 }],
  ['POST 502 after processing', { target: 'post', kind: 'status', status: 502, afterProcessing: true, times: 1 }],
  ['POST reset after processing', { target: 'post', kind: 'reset', afterProcessing: true, times: 1 }],
  ['POST hang after processing', { target: 'post', kind: 'hang', afterProcessing: true, times: 1 }],
  ['POST 503 before processing', { target: 'post', kind: 'status', status: 503, times: 1 }],
  ['POST 429', { target: 'post', kind: 'status', status: 429, headers: { 'Retry-After': '0' }, times: 2 }],
  ['token revoked', { target: 'service', kind: 'revoke', times: 1 }],
  ['token endpoint 503', { target: 'token', kind: 'status', status: 503, times: 1 }],
  ['token endpoint slow', { target: 'token', kind: 'latency', delayMs: 300, times: 1 }],
  ['latency 200 ms', { target: 'service', kind: 'latency', delayMs: 200, times: 5 }],
  // Hostile servers: slow bodies, deep JSON, echoed credentials, cut or dripping accepted answers.
  ['GET drip', { target: 'get', kind: 'drip', delayMs: 400, times: 2 }],
  ['GET deep', { target: 'get', kind: 'deep', depth: 5000, times: 1 }],
  ['GET echo', { target: 'get', kind: 'echo', times: 2 }],
  ['GET 400 echo', { target: 'get', kind: 'echo', status: 400, times: 1 }],
  ['POST cut 202', { target: 'post', kind: 'cut', times: 1 }],
  ['POST drip 202', { target: 'post', kind: 'drip', delayMs: 400, times: 1 }],
  ['POST echo', { target: 'post', kind: 'echo', times: 1 }],
  ['token drip', { target: 'token', kind: 'drip', delayMs: 400, times: 1 }],
  ['token echo 401', { target: 'token', kind: 'echo', status: 401, times: 1 }],
  ['token 429 Retry-After 1', { target: 'token', kind: 'status', status: 429, headers: { 'Retry-After': '1' }, times: 1 }],
  // Real servers' connection habits: each answer closes its connection (no Connection: close),
  // or idle keep-alive connections close with no Keep-Alive hint (IDLE_CLOSE below).
  ['close after 20 answers', { target: 'any', kind: 'close-after-answer', times: 20 }],
  ['POST close after answer', { target: 'post', kind: 'close-after-answer', times: 5 }],
  ['token close after answer', { target: 'token', kind: 'close-after-answer', times: 1 }],
  ['idle-close', { target: 'any', kind: 'idle-close' }],
];

/** The station's own faults, for the control rotation: a START or STOP accepted (202) and not carried out. */
export const STATION_FAULTS: Array<[string, FaultRule]> = [
  ['station ignores a START', { target: 'post', kind: 'ignore-start', times: 1 }],
  ['station ignores a STOP', { target: 'post', kind: 'ignore-stop', times: 1 }],
];

/** idle-close in the rotation: for IDLE_CLOSE_FOR_MS, idle connections close after 50-1000 ms. */
const IDLE_CLOSE_FOR_MS = 3_000;
/** Shortest gap between two token revocations (tokens live 12 s in the soak). */
const REVOKE_GAP_MS = 4_000;

/** Injects a random fault every 100 ms until stop(); returns how many it injected. */
export function injectFaults(sim: ChargingServiceSimulator, random: () => number, faults: Array<[string, FaultRule]> = FAULTS): { stop(): void; readonly injected: number } {
  let injected = 0;
  let idleCloseTimer: NodeJS.Timeout | undefined;
  let lastRevokeAt = -Infinity;
  const timer = setInterval(() => {
    const [, rule] = faults[Math.floor(random() * faults.length)];
    if (rule.kind === 'idle-close') {
      if (idleCloseTimer) return;
      sim.setIdleClose(50 + Math.floor(random() * 950));
      injected++;
      idleCloseTimer = setTimeout(() => {
        sim.setIdleClose(null);
        idleCloseTimer = undefined;
      }, IDLE_CLOSE_FOR_MS);
      return;
    }
    // Token requests are rare (one per token lifetime): faults for them would queue up until every
    // token request met one. One at a time keeps the token endpoint flaky rather than dead.
    if (rule.target === 'token' && sim.pendingFaults().some((f) => f.target === 'token')) return;
    // The same for revocations: while the client backs off after a token failure no service request
    // uses them up, and a pile of them would revoke every fresh token after the pause, for ever.
    if (rule.kind === 'revoke' && sim.pendingFaults().some((f) => f.kind === 'revoke')) return;
    // And not more than one every REVOKE_GAP_MS: a revocation that lands on the token the client has just
    // fetched reads "the service refuses fresh tokens" and earns a back-off, as it should in production;
    // revoking every few hundred ms turned the soak into a test of that back-off (19 000 of 20 000 AUTH).
    if (rule.kind === 'revoke') {
      if (performance.now() - lastRevokeAt < REVOKE_GAP_MS) return;
      lastRevokeAt = performance.now();
    }
    sim.inject({ ...rule });
    injected++;
  }, 100);
  return {
    stop() {
      clearInterval(timer);
      clearTimeout(idleCloseTimer);
      sim.clearFaults();
    },
    get injected() {
      return injected;
    },
  };
}
