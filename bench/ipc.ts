/**
 * The bench's forked processes (server.ts, contender.ts, fleet.ts, compare-builds.ts) and the parent that
 * drives them: numbered calls over IPC, each answered once, an error as its
 * stack. One piece for both sides, so every section talks to its children
 * the same way.
 */
import type { ChildProcess } from 'node:child_process';

/** In the child: answers each call with what `handle` resolves, or its error. */
export function serve<C extends object>(handle: (m: C) => Promise<Record<string, unknown>>): void {
  process.on('message', (m: C & { id: number }) => {
    handle(m).then(
      (out) => process.send?.({ id: m.id, ...out }),
      (err: Error) => process.send?.({ id: m.id, error: err.stack ?? String(err) }),
    );
  });
}

/** In the parent: a forked child and its calls. */
export class ChildCalls<C extends { cmd: string }> {
  private next = 0;
  private readonly replies = new Map<number, (m: Record<string, unknown>) => void>();

  constructor(private readonly proc: ChildProcess) {
    proc.on('message', (m: Record<string, unknown> & { id: number }) => {
      this.replies.get(m.id)?.(m);
      this.replies.delete(m.id);
    });
  }

  /** The child's answer; most are figures, hence the default. */
  call<R = Record<string, number>>(m: C): Promise<R> {
    const id = ++this.next;
    return new Promise((resolve, reject) => {
      this.replies.set(id, (r) => (r.error ? reject(new Error(String(r.error))) : resolve(r as R)));
      this.proc.send({ ...m, id });
    });
  }

  /** Asks the child to exit (it stops its Node-RED first), then kills it whatever it answered. */
  async exit(): Promise<void> {
    await this.call({ cmd: 'exit' } as C).catch(() => undefined);
    this.proc.kill();
  }
}
