import assert from 'node:assert/strict';
import { startCommand, stopCommand } from '../../../nodes/lib/session/commands';

describe('session commands: the bodies of START and STOP (spec §2.1)', () => {
  it('START has exactly action, locationId, evseId (a string), token', () => {
    const cmd = startCommand({ locationId: 'L', evseId: '7', token: 'T' });
    assert.equal(JSON.stringify(cmd), '{"action":"START","locationId":"L","evseId":"7","token":"T"}');
  });

  it('STOP adds transactionId', () => {
    const cmd = stopCommand({ locationId: 'L', evseId: '7', token: 'T', transactionId: 'X' });
    assert.equal(JSON.stringify(cmd), '{"action":"STOP","locationId":"L","evseId":"7","token":"T","transactionId":"X"}');
  });
});
