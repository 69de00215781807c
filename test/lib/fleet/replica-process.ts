/**
 * A replica in a process of its own, for the fleet tests that need real
 * separate processes (a kill -9 has to kill something). Started by
 * spawnReplica() with one JSON argument:
 *
 * - budget: takes from the fleet's budget (reserving up to 1 s ahead) as fast as it lets it between
 *   startAt and startAt + durationMs (epoch ms), then prints the grant times
 *   (Redis's clock, µs) as one JSON line and exits.
 * - watch: joins a watch scope over the given tokens and reports the tokens
 *   it owns over IPC at every change, until killed.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { Fleet } from '../../../nodes/lib/fleet/fleet';

export type ReplicaTask =
  | { mode: 'budget'; url: string; fleetKey: string; limit: number; startAt: number; durationMs: number }
  | { mode: 'watch'; url: string; fleetKey: string; scope: string; tokens: string[]; cycleMs: number; leaseMs: number };

export interface OwnedReport {
  id: string;
  owned: string[];
}

/** Starts this file as a child process on the same Node (IPC on for 'watch'). */
export function spawnReplica(task: ReplicaTask): ChildProcess {
  return spawn(process.execPath, [__filename, JSON.stringify(task)], { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
}

async function budget(task: Extract<ReplicaTask, { mode: 'budget' }>): Promise<void> {
  const fleet = new Fleet({ url: task.url, fleetKey: task.fleetKey, cycleMs: 500 });
  await fleet.connection.open();
  const shared = fleet.budget(task.limit);
  await new Promise((r) => setTimeout(r, Math.max(0, task.startAt - Date.now())));
  const grants: number[] = [];
  const end = task.startAt + task.durationMs;
  while (Date.now() < end) {
    const take = await shared.take(1_000);
    if (take.kind === 'go') {
      grants.push(take.atUs);
      await new Promise((r) => setTimeout(r, take.delayMs));
    } else if (take.kind === 'wait') await new Promise((r) => setTimeout(r, take.waitMs));
    else throw take.error;
  }
  await fleet.close();
  process.stdout.write(`${JSON.stringify({ grants })}\n`);
}

function watch(task: Extract<ReplicaTask, { mode: 'watch' }>): void {
  const fleet = new Fleet({ url: task.url, fleetKey: task.fleetKey, cycleMs: task.cycleMs, leaseMs: task.leaseMs, commandTimeoutMs: 400 });
  const report = () => process.send?.({ id: fleet.replicaId, owned: own.owned() } satisfies OwnedReport);
  const own = fleet.scope<unknown>(task.scope, { onChange: report });
  own.add(task.tokens).then(report, (err: Error) => process.send?.({ error: err.message }));
  process.on('disconnect', () => process.exit(0));
}

if (require.main === module) {
  const task = JSON.parse(process.argv[2] ?? '{}') as ReplicaTask;
  if (task.mode === 'budget') {
    budget(task).catch((err: Error) => {
      process.stderr.write(`replica failed: ${err.message}\n`);
      process.exit(1);
    });
  } else watch(task);
}
