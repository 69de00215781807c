/**
 * The lifecycle every node of this package shares, modelled on core
 * `21-httprequest`: `on('input', (msg, send, done))`, a badge while working and
 * a red ring on error, errors to Catch through `done(err)`, the badge cleared
 * and work abandoned on close. Every send and done is guarded: a message that
 * Node-RED cannot pass on (or clone for Catch) is reported, never thrown into
 * an async function where it would stop Node-RED.
 */
import { setMaxListeners } from 'node:events';
import type { Node, NodeAPI, NodeMessage, NodeMessageInFlow } from 'node-red';
import { CLOSE_GRACE_MS } from '../lib/client/service-client';
import type { ServiceClient } from '../lib/client/service-client';
import { ChargingError, isChargingError } from '../lib/errors';
import { ChargingServiceNode, getService } from './service-node';
import { monotonicNow } from '../lib/clock';
import { NodeStatus, Status } from './status';
import { StatusBoard } from './status-board';
import { runtimeLanguage } from './status-language';
import type { ShareVoice } from '../lib/coordination/coordination';

export type Outputs = NodeMessage | Array<NodeMessage | null> | null;

export interface WorkContext {
  client: ServiceClient;
  service: ChargingServiceNode;
  /** aborted when the node closes */
  signal: AbortSignal;
  status(s: NodeStatus): void;
  /** a warning shown when its text for `key` changes, not for every message (e.g. "200 instead of 202") */
  warnOnce(key: string, text: string): void;
}

type Send = (msg: Outputs extends infer T ? Exclude<T, null> : never) => void;
type Done = (err?: Error) => void;

/** Any failure as a ChargingError: ours as they are, anything else as INTERNAL (a bug to report). */
export function asChargingError(err: unknown, redact: (s: string) => string = (s) => s): ChargingError {
  if (isChargingError(err)) return err;
  const text = redact(String((err as Error)?.message ?? err)).slice(0, 300);
  return new ChargingError('INTERNAL', `Unexpected failure in the charging nodes (please report it): ${text}`);
}

export class NodeLifecycle {
  readonly board: StatusBoard;
  private readonly controller = new AbortController();
  private readonly inFlight = new Set<Promise<void>>();
  private readonly cleanups: Array<(removed: boolean) => void | Promise<void>> = [];
  /** the last warning text shown per key */
  private readonly warned = new Map<string, string>();
  private closed = false;

  constructor(
    private readonly RED: NodeAPI,
    private readonly node: Node,
  ) {
    // The badge speaks the language of this node's own runtime, whichever nodes it registered.
    this.board = new StatusBoard(node, monotonicNow, runtimeLanguage(RED));
    // Waits of many messages may listen on this one signal at once.
    setMaxListeners(0, this.controller.signal);
    node.on('close', (removed: boolean, done: () => void) => this.close(removed, done));
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** Runs `work` for every input message; what it returns is sent, what it throws goes to Catch. */
  onInput(serviceId: string | undefined, work: (msg: NodeMessageInFlow, ctx: WorkContext) => Promise<Outputs>): void {
    this.listen((msg, send, done) => this.handle(serviceId, work, msg, send, done));
  }

  /** The same for a node that sends nothing to the service (a depot's status): no client. */
  onMessage(work: (msg: NodeMessageInFlow) => Promise<Outputs>): void {
    this.listen((msg, send, done) => this.deliver(() => work(msg), send, done));
  }

  private listen(run: (msg: NodeMessageInFlow, send: Send, done: Done) => Promise<void>): void {
    this.node.on('input', (msg: NodeMessageInFlow, send: Send, done: Done) => {
      const job = run(msg, send, done);
      this.inFlight.add(job);
      const forget = () => this.inFlight.delete(job);
      job.then(forget, forget);
    });
  }

  /** Work the node started by itself (a control node's check): closing waits for it, as for a message's, within the grace. */
  track(work: Promise<unknown>): void {
    const job = work.then(
      () => undefined,
      () => undefined,
    );
    this.inFlight.add(job);
    const forget = () => this.inFlight.delete(job);
    void job.then(forget);
  }

  /** Work to do when the node closes (besides aborting its requests and clearing its badge). */
  /** A cleanup that returns a promise (leases given back) is waited for, within the close grace. */
  onClose(cleanup: (removed: boolean) => void | Promise<void>): void {
    this.cleanups.push(cleanup);
  }

  /** A message the node sends by itself (watch mode), guarded like any other. */
  emit(out: Outputs): void {
    if (this.closed || out === null) return;
    try {
      this.node.send(out);
    } catch (err) {
      this.report(new ChargingError('INTERNAL', `Could not pass the message on: ${(err as Error)?.message ?? String(err)}`));
    }
  }

  /** An error the node finds by itself (watch mode): red badge, Catch with `msg` when given. */
  report(err: unknown, msg?: NodeMessage): void {
    const error = asChargingError(err);
    this.board.set(Status.error(error));
    this.safely(() => (msg ? this.node.error(error, msg) : this.node.error(error)), error);
  }

  /**
   * Warns when the warning for `key` changes: once per streak, not once per
   * message. Numbers do not count as a change: a meter running past the
   * plausible limit warns once, not on every poll with its new reading.
   */
  /** How a coordination share speaks through this node: its warnings once per key, its errors to Catch. */
  voice(): ShareVoice {
    return { warnOnce: (key, text) => this.warnOnce(key, text), report: (err, about) => this.report(err, about as NodeMessage | undefined) };
  }

  warnOnce(key: string, text: string): void {
    const shape = text.replace(/\d+(\.\d+)?/g, '#');
    if (this.warned.get(key) === shape) return;
    this.warned.set(key, shape);
    this.node.warn(text);
  }

  private async handle(serviceId: string | undefined, work: (msg: NodeMessageInFlow, ctx: WorkContext) => Promise<Outputs>, msg: NodeMessageInFlow, send: Send, done: Done): Promise<void> {
    let client: ServiceClient | undefined;
    const run = async () => {
      const service = getService(this.RED, serviceId);
      client = service.getClient();
      return work(msg, {
        client,
        service,
        signal: this.controller.signal,
        status: (s) => this.board.set(s),
        warnOnce: (key, text) => this.warnOnce(key, text),
      });
    };
    return this.deliver(run, send, done, (s) => (client ? client.redact(s) : s));
  }

  /** Runs one message's work: its result sent, its failure to Catch (redacted), guarded both ways. */
  private async deliver(run: () => Promise<Outputs>, send: Send, done: Done, redact?: (s: string) => string): Promise<void> {
    let out: Outputs;
    try {
      out = await run();
    } catch (err) {
      if (this.closed && isChargingError(err) && err.code === 'CLOSED') return this.finish(done);
      const error = asChargingError(err, redact);
      this.board.set(Status.error(error));
      return this.safely(() => done(error), error);
    }
    if (this.closed) return this.finish(done); // nothing is sent after close
    if (out !== null) {
      try {
        send(out as Exclude<Outputs, null>);
      } catch (err) {
        const error = new ChargingError('INTERNAL', `Could not pass the result on (${(err as Error)?.message ?? String(err)}); nothing was sent`);
        this.board.set(Status.error(error));
        return this.safely(() => done(error), error);
      }
    }
    this.finish(done);
  }

  private finish(done: Done): void {
    try {
      done();
    } catch {
      // done() of a node being closed: nothing left to tell
    }
  }

  /** Reports through `report`; if even that throws (a message Node-RED cannot clone for Catch), the log still hears of it. */
  private safely(report: () => void, error: ChargingError): void {
    try {
      report();
    } catch (err) {
      try {
        this.node.error(`${error.message} (could not be passed to Catch: ${(err as Error)?.message ?? String(err)})`);
      } catch {
        // the node is gone
      }
    }
  }

  private close(removed: boolean, done: () => void): void {
    this.closed = true;
    this.controller.abort();
    this.board.close();
    const pending: Array<Promise<unknown>> = [];
    for (const c of this.cleanups) {
      try {
        const p = c(removed);
        if (p) pending.push(p.catch(() => undefined));
      } catch {
        // closing goes on
      }
    }
    // Requests on the wire get a grace period (a START half-sent is better finished), well inside Node-RED's 15 s.
    let finished = false;
    const finish = () => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      done();
    };
    const timer = setTimeout(finish, CLOSE_GRACE_MS);
    timer.unref?.();
    void Promise.allSettled([...this.inFlight, ...pending]).then(finish);
  }
}
