/**
 * Coordination through Redis (docs/fleet.md): the Coordination a
 * configuration node hands its nodes when *Coordinate replicas* is set. Each
 * capability is one piece of the Fleet: the command claim (dedup.ts), the
 * client's shared token and budget (Fleet.clientHooks), a watch node's leases
 * (watch-link.ts) and a control node's targets (control-link.ts).
 */
import type { FleetHooks } from '../client/fleet-hooks';
import type { CommandRun, CommandShare, ControlShare, Coordination, ShareVoice, WatchShare, WatchShareOptions } from '../coordination/coordination';
import type { ClaimPolicy, ClaimRun, Claims } from '../coordination/claims';
import type { ServiceReachShare } from '../coordination/reach';
import type { ChargingError } from '../errors';
import type { ChargingCommand } from '../session/commands';
import { FleetControlLink } from './control-link';
import type { Fleet } from './fleet';
import { digestOf } from './keys';
import { FleetWatchLink } from './watch-link';

export class RedisCoordination implements Coordination {
  readonly commands: CommandShare;
  readonly claims: Claims;
  readonly reach: ServiceReachShare;

  constructor(readonly fleet: Fleet) {
    this.reach = fleet.reach;
    this.commands = {
      run: async <T>(command: ChargingCommand, send: () => Promise<T>, longestMs: number, unshared: (err: ChargingError) => void): Promise<CommandRun<T>> => {
        // The claim outlives the whole operation, and the others wait as long for its outcome.
        const run = await fleet.commands.run(command, send, longestMs, unshared, longestMs);
        return run.role === 'sent' ? { ...run, sender: fleet.replicaId } : run;
      },
    };
    this.claims = {
      run: async <T>(key: string, work: () => Promise<T>, policy: ClaimPolicy, unshared: (err: ChargingError) => void): Promise<ClaimRun<T>> => {
        const windowMs = policy.windowMs ?? fleet.commands.windowMs;
        const at = fleet.keys.claim(digestOf(['claim', key]));
        const run = await fleet.commands.runAt(at, policy.takeOver === 'when-claimer-gone', work, policy.workMs, policy.workMs, windowMs, unshared);
        if (run.role !== 'sent') return run;
        return run.deduplicated ? { role: 'ran', shared: true, result: run.result, by: fleet.replicaId } : { role: 'ran', shared: false, result: run.result };
      },
    };
  }

  clientHooks(): FleetHooks {
    return this.fleet.clientHooks();
  }

  watch(scope: string, options: WatchShareOptions): WatchShare {
    return new FleetWatchLink(this.fleet, scope, options);
  }

  control(scope: string, voice: ShareVoice): ControlShare {
    return new FleetControlLink(this.fleet, scope, voice);
  }
}
