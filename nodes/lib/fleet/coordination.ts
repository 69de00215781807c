/**
 * Coordination through Redis (docs/fleet.md): the Coordination a
 * configuration node hands its nodes when *Coordinate replicas* is set. Each
 * capability is one piece of the Fleet: the command claim (dedup.ts), the
 * client's shared token and budget (Fleet.clientHooks), a watch node's leases
 * (watch-link.ts) and a control node's targets (control-link.ts).
 */
import type { FleetHooks } from '../client/fleet-hooks';
import type { CommandRun, CommandShare, ControlShare, Coordination, CoordinationFigures, ShareVoice, WatchShare, WatchShareOptions } from '../coordination/coordination';
import type { ClaimPolicy, ClaimRun, Claims } from '../coordination/claims';
import type { ChargingError } from '../errors';
import type { ChargingCommand } from '../session/commands';
import { FleetControlLink } from './control-link';
import type { Fleet } from './fleet';
import { digestOf } from './keys';
import { FleetWatchLink } from './watch-link';

export class RedisCoordination implements Coordination {
  readonly commands: CommandShare;
  readonly claims: Claims;
  /** the fleet's scopes this configuration's nodes opened (a watch node's id; control:<id>): its leases are counted there */
  private readonly scopes = new Set<string>();
  private standDowns = 0;

  constructor(readonly fleet: Fleet) {
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
    this.scopes.add(scope);
    return new FleetWatchLink(this.fleet, scope, options, () => this.standDowns++);
  }

  control(scope: string, voice: ShareVoice): ControlShare {
    this.scopes.add(`control:${scope}`);
    return new FleetControlLink(this.fleet, scope, voice);
  }

  /** Read from what the fleet keeps anyway: its health, the leases of this configuration's scopes, the replicas, the last heartbeat. */
  figures(): CoordinationFigures {
    const up = this.fleet.health.up;
    const rtt = this.fleet.roundTripMs;
    return {
      leasesHeld: this.fleet.leasesHeld(this.scopes),
      replicas: this.fleet.replicas().length,
      redisUp: up,
      ...(up && rtt !== null ? { redisRoundTripSeconds: rtt / 1000 } : {}),
      standDowns: this.standDowns,
    };
  }
}
