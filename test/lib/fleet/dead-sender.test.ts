/**
 * A replica that claimed a command and died before sending it (kill -9; found
 * by the nemesis over processes, test/fleet-process-chaos.ts): its claim lives
 * sendMs + windowMs (62 s by default), so the same STOP injected again after
 * the duplicates said OUTCOME_UNKNOWN (what the error tells the user to check,
 * then do) is a "duplicate" of a sender that is gone, and is not sent either:
 * a STOP that does not stop for a minute.
 */
import assert from 'node:assert/strict';
import { stopCommand } from '../../../nodes/lib/session/commands';
import { fleetSuite } from './fleet-fixture';

describe('fleet: a command claimed by a replica that died before sending it', function () {
  this.timeout(20_000);
  const suite = fleetSuite();

  it('the same STOP again, past the window, once the claimer has left the fleet: sent by a live replica', async () => {
    const dead = suite.replica();
    const live = suite.replica();
    await dead.connection.open();
    await live.connection.open();
    const cmd = stopCommand({ locationId: 'L', evseId: '1', token: 'DEAD-1', transactionId: 'TX-DEAD-1' });
    const claimed = await dead.commands.claim(cmd, 5_000);
    assert.equal(claimed.role, 'sender');
    // It dies holding the claim: no publish; its membership lapses (close() is the quick way out of the fleet).
    await dead.close();
    await new Promise((r) => setTimeout(r, dead.commands.windowMs + 500));
    let sent = 0;
    const run = await live.commands.run(cmd, async () => ++sent, 3_000);
    assert.equal(run.role, 'sent', `a STOP asked for again is sent, got ${JSON.stringify(run)}`);
    assert.equal(sent, 1);
  });
});
