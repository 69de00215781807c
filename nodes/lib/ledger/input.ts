/**
 * What a message to the ledger is, by its shape: a watch event
 * (`started`/`updated` open or advance a record, `ended` closes it), the stop
 * node's output after "make sure it ends" (`msg.outcome` "ended"), or a
 * command in `msg.topic`. Anything else is INVALID_INPUT: nothing changes.
 */
import { ChargingError } from '../errors';
import type { SessionFacts } from './record';

export const COMMANDS = ['report', 'export', 'get', 'cdr', 'tariffs', 'tokens', 'purge', 'forget'] as const;
export type CommandTopic = (typeof COMMANDS)[number];

export type LedgerInput =
  | { kind: 'open' | 'close'; facts: SessionFacts }
  | { kind: 'command'; topic: CommandTopic; payload: unknown }
  /** a watch event that books nothing (pending, poll), or a stop that did not end the session */
  | { kind: 'none' };

function own(obj: unknown, key: string): unknown {
  return obj !== null && typeof obj === 'object' && Object.prototype.hasOwnProperty.call(obj, key) ? (obj as Record<string, unknown>)[key] : undefined;
}

function text(v: unknown): string | null {
  if (typeof v === 'string' && v !== '') return v.slice(0, 200);
  return typeof v === 'number' && Number.isFinite(v) ? String(v) : null;
}

function num(v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
}

/** msg.session as the watch or stop node made it; null without a transaction (a session that never started). */
export function factsOf(session: unknown, endObserved: boolean): SessionFacts | null {
  const transactionId = text(own(session, 'transactionId'));
  if (transactionId === null) return null;
  const observed = own(session, 'endObserved');
  return {
    transactionId,
    cdrId: text(own(session, 'cdrId')),
    token: text(own(session, 'token')),
    locationId: text(own(session, 'locationId')),
    evseId: text(own(session, 'evseId')),
    meterStart: num(own(session, 'meterStart')),
    meterEnd: num(own(session, 'meterEnd')),
    startedAt: text(own(session, 'startedAt')),
    updatedAt: text(own(session, 'updatedAt')),
    endObserved: typeof observed === 'boolean' ? observed : endObserved,
  };
}

export function classify(msg: Record<string, unknown>): LedgerInput {
  const event = msg.event;
  if (event === 'started' || event === 'updated' || event === 'ended') {
    const facts = factsOf(msg.session, true);
    if (facts) return { kind: event === 'ended' ? 'close' : 'open', facts };
    return { kind: 'none' };
  }
  if (event === 'pending' || event === 'poll') return { kind: 'none' };
  if (typeof msg.outcome === 'string' && msg.session !== undefined) {
    const facts = msg.outcome === 'ended' ? factsOf(msg.session, true) : null;
    return facts ? { kind: 'close', facts } : { kind: 'none' };
  }
  const topic = msg.topic;
  if (typeof topic === 'string' && (COMMANDS as readonly string[]).includes(topic)) return { kind: 'command', topic: topic as CommandTopic, payload: msg.payload };
  throw new ChargingError(
    'INVALID_INPUT',
    'The ledger takes watch events (msg.event), the stop node\'s output, or a command in msg.topic: report, export, get, cdr, tariffs, tokens, purge, forget',
    { field: 'topic' },
  );
}
