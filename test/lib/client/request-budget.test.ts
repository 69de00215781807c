import { strict as assert } from 'assert';
import { RequestBudget } from '../../../nodes/lib/client/request-budget';

describe('RequestBudget (#17.3, not yet wired)', function () {
  it('a command queued behind 1 000 polls starts before every one of them', async function () {
    const budget = new RequestBudget(50);
    const order: string[] = [];
    await budget.acquire(1, 'first');
    const polls = Array.from({ length: 1000 }, (_, i) => budget.acquire(1, `t${i}`).then(() => order.push(`p${i}`)));
    const cmd = budget.acquire(0).then(() => order.push('START'));
    await cmd;
    assert.equal(order[0], 'START');
    budget.close();
    void polls;
  });

  it('a poll for a token already queued is merged, not queued twice', async function () {
    const budget = new RequestBudget(20);
    await budget.acquire(1, 'a');
    const p1 = budget.acquire(1, 'b');
    const p2 = budget.acquire(1, 'b');
    assert.equal(budget.queuedPolls, 1);
    await Promise.all([p1, p2]);
    budget.close();
  });

  it('a 429 halves the rate used; good answers climb back to the limit', function () {
    const budget = new RequestBudget(4);
    budget.onThrottled();
    assert.equal(budget.currentRate, 2);
    for (let i = 0; i < 20; i++) budget.onGood();
    assert.equal(budget.currentRate, 4);
  });

  it('never starts more than limit+1 requests in any 1 s window', async function () {
    this.timeout(5000);
    const budget = new RequestBudget(10);
    const starts: number[] = [];
    await Promise.all(Array.from({ length: 15 }, () => budget.acquire(0).then(() => starts.push(performance.now()))));
    for (const t of starts) assert.ok(starts.filter((s) => s >= t && s < t + 1000).length <= 11);
    budget.close();
  });
});
