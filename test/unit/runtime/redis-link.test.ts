// A store's view of its Redis (runtime/redis.ts, RedisLink; issue 44 rule 1):
// down from a failed or timed-out command until a probe is answered, never up
// on a reconnect alone; probes retryStepMs apart, further each time, up to
// retryMaxMs; `empty` while the probe says Redis lacks what the store needs.
// A stand-in client answers the probes as told; fake timers, so nothing waits.
import { EventEmitter } from 'node:events';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { RedisLink, type RedisProbe, type RedisState } from '../../../runtime/redis.ts';

const TIMES = { commandTimeout: 50, retryStepMs: 100, retryMaxMs: 300 };

/** A client whose PING answers as `answer` says: 'ok', 'fail', or 'hang' (a stalled Redis). */
class FakeClient extends EventEmitter {
  answer: 'ok' | 'fail' | 'hang' = 'ok';
  /** Fake time of each PING. */
  readonly pings: number[] = [];
  private pending: (() => void)[] = [];
  ping(): Promise<string> {
    this.pings.push(Date.now());
    if (this.answer === 'ok') return Promise.resolve('PONG');
    if (this.answer === 'fail') return Promise.reject(new Error('Command timed out'));
    return new Promise((ok) => this.pending.push(() => ok('PONG')));
  }
  /** Redis wakes: the probes it had are answered. */
  wake(): void {
    for (const p of this.pending.splice(0)) p();
  }
  disconnect(): void {}
}

function link(probe?: RedisProbe) {
  const client = new FakeClient();
  const states: [RedisState, RedisState][] = [];
  const l = new RedisLink(client as never, TIMES, (s, was) => states.push([s, was]), probe);
  return { client, l, states };
}

beforeEach(() => void vi.useFakeTimers({ now: 0 }));
afterEach(() => void vi.useRealTimers());

describe('RedisLink', () => {
  it('goes up on an answered probe, not on a reconnect: a stalled Redis that reconnected is still down', async () => {
    const { client, l, states } = link();
    client.answer = 'hang';
    client.emit('ready');
    await vi.advanceTimersByTimeAsync(1000);
    expect(l.state).toBe('down');
    client.wake();
    await vi.advanceTimersByTimeAsync(0);
    expect(l.state).toBe('up');
    expect(states).toEqual([['up', 'down']]);
  });

  it('after a failed command: down at once, probes retryStepMs apart and further each time up to retryMaxMs, up on the first answer', async () => {
    const { client, l, states } = link();
    await l.check();
    expect(l.up).toBe(true);
    client.answer = 'fail';
    l.failed();
    expect(l.state).toBe('down');
    await vi.advanceTimersByTimeAsync(1000);
    // The first check at 0; then 100 after the failure, 200 later, then 300 (the most) apart.
    expect(client.pings).toEqual([0, 100, 300, 600, 900]);
    client.answer = 'ok';
    await vi.advanceTimersByTimeAsync(300);
    expect(l.state).toBe('up');
    expect(states).toEqual([
      ['up', 'down'],
      ['down', 'up'],
      ['up', 'down'],
    ]);
    // Up again (at 1200): the next outage, at 1300, starts from retryStepMs.
    l.failed();
    await vi.advanceTimersByTimeAsync(100);
    expect(client.pings.at(-1)).toBe(1400);
  });

  it('empty while the probe finds Redis without what the store needs, asked again until it has it', async () => {
    let usable = false;
    const { l, states } = link(() => Promise.resolve(usable));
    await l.check();
    expect(l.state).toBe('empty');
    await vi.advanceTimersByTimeAsync(1000);
    expect(l.state).toBe('empty');
    usable = true;
    await vi.advanceTimersByTimeAsync(300);
    expect(l.state).toBe('up');
    expect(states).toEqual([
      ['empty', 'down'],
      ['up', 'empty'],
    ]);
  });

  it('a dropped connection is down too; once closed, nothing more is probed or reported', async () => {
    const { client, l, states } = link();
    await l.check();
    client.emit('close');
    expect(l.state).toBe('down');
    l.close();
    client.emit('ready');
    await vi.advanceTimersByTimeAsync(1000);
    expect(l.state).toBe('down');
    expect(states).toEqual([
      ['up', 'down'],
      ['down', 'up'],
    ]);
    expect(client.pings).toHaveLength(1);
  });
});
