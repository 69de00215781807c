/**
 * The floor every benchmark contender is compared with: axios built with the
 * client's own axiosOptions() and keep-alive agents, a prebuilt URL, and
 * JSON.parse of the body (bench/query-bench.ts, watch-bench.ts via contender.ts, and watch-profile.ts use it).
 */
import http from 'node:http';
import https from 'node:https';
import axios, { AxiosInstance } from 'axios';
import { axiosOptions, agentOptions } from '../nodes/lib/client/transport';
import { DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_IN_FLIGHT } from '../nodes/lib/client/service-client';
import { watchTickMs } from '../nodes/lib/session/watcher';

export type Drive = (i: number) => Promise<void>;

/** (a0) axios configured exactly as the client configures it (transport.ts axiosOptions), used as cheaply as axios allows, plus JSON.parse. */
export function a0Client(base: string, maxSockets: number, prefix = 'T'): { drive: Drive; query(token: string): Promise<unknown>; close(): void } {
  const httpAgent = new http.Agent(agentOptions(maxSockets));
  const httpsAgent = new https.Agent(agentOptions(maxSockets));
  const ax: AxiosInstance = axios.create(axiosOptions({ httpAgent, httpsAgent }, DEFAULT_MAX_BODY_BYTES));
  const headers = { Authorization: 'Bearer bench-token-value', Accept: 'application/json' };
  const url = `${base}/poi/v1/charging-sessions`;
  const query = async (token: string) => JSON.parse((await ax.request<string>({ method: 'GET', url: `${url}?token=${encodeURIComponent(token)}`, headers })).data) as unknown;
  return {
    query,
    drive: async (i) => {
      await query(`${prefix}${i}`);
    },
    close: () => {
      httpAgent.destroy();
      httpsAgent.destroy();
    },
  };
}

/**
 * Bare axios polling as barePolling does, each record handed to `send` as a
 * message: with a minimal node's send, what any node that emits one Node-RED
 * message per poll pays (the 'nodered' contender of bench/watch-bench.ts and bench/watch-profile.ts).
 */
export function messagePolling(base: string, n: number, intervalMs: number, send: (msg: { topic: string; payload: unknown }) => void, prefix = 'T'): { stop(): void; polls(): number } {
  const a0 = a0Client(base, DEFAULT_MAX_IN_FLIGHT, prefix);
  const bare = barePolling(base, n, intervalMs, (i) => a0.query(`${prefix}${i}`).then((record) => send({ topic: `${prefix}${i}`, payload: record })), prefix);
  return {
    stop: () => {
      bare.stop();
      a0.close();
    },
    polls: bare.polls,
  };
}

/**
 * Bare axios polling N tokens (`${prefix}0` …) on the watcher's schedule (one
 * timer, polls spread over the interval), each record parsed; or, with `poll`,
 * that instead of bare axios.
 */
export function barePolling(base: string, n: number, intervalMs: number, poll?: (i: number) => Promise<unknown>, prefix = 'T'): { stop(): void; polls(): number } {
  let a0: ReturnType<typeof a0Client> | null = null;
  const drive = poll ?? (a0 = a0Client(base, DEFAULT_MAX_IN_FLIGHT, prefix)).drive;
  let polls = 0;
  let cursor = 0;
  let budget = 0;
  let last = performance.now();
  const tick = watchTickMs(intervalMs, n);
  const timer = setInterval(() => {
    const now = performance.now();
    budget += (n * (now - last)) / intervalMs;
    last = now;
    for (; budget >= 1; budget--) {
      const i = cursor++ % n;
      polls++;
      drive(i).catch(() => undefined);
    }
  }, tick);
  return {
    stop: () => {
      clearInterval(timer);
      a0?.close();
    },
    polls: () => polls,
  };
}
