/**
 * The federated round state against the run's real Redis: each guarantee of round-store.ts —
 * an update counts once, refusals say why, a round closes on its quorum or its deadline, a
 * claim is a lease, a commit happens once — checked on its own, then a job resumed.
 */
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createRoundStore } from '../../../shared/fl/round-store.js';
import type { RoundStore } from '../../../shared/fl/round-store.js';
import { testRedis } from '../../support/redis.js';
import type { TestRedis } from '../../support/redis.js';

const t0 = 1_000_000;
const workers = ['edge0', 'edge1', 'edge2'];
const weights = (fill: number) => Buffer.alloc(16, fill);

describe('the federated round store', () => {
  let redis: TestRedis;
  let store: RoundStore;
  let job: string;

  beforeEach(async () => {
    redis = await testRedis();
    job = randomUUID();
    store = createRoundStore(redis.client, `default/digits/${job}`);
    await store.open({
      selected: workers,
      quorum: 2,
      nowMs: t0,
      deadlineMs: t0 + 60_000,
      sha: 'v0',
    });
  });
  afterEach(() => redis.close());

  const send = (worker: string, over: Partial<{ round: number; base: number }> = {}) =>
    store.offer({
      round: over.round ?? 1,
      worker,
      base: over.base ?? 0,
      meta: JSON.stringify({ worker, samples: 10 }),
      weights: weights(workers.indexOf(worker) + 1),
      nowMs: t0 + 1000,
    });

  it('opens round 1 once; a second open finds it and changes nothing', async () => {
    await send('edge0');
    const again = await store.open({
      selected: ['other'],
      quorum: 1,
      nowMs: t0 + 5,
      deadlineMs: t0 + 6,
      sha: 'other',
    });
    expect(again.created).toBe(false);
    expect(again.state).toMatchObject({ status: 'open', round: 1, n: 1, selected: workers });
  });

  it('counts a redelivered update once and keeps its first weights', async () => {
    expect(await send('edge0')).toEqual({
      kind: 'accepted',
      n: 1,
      quorum: 2,
      selected: 3,
      round: 1,
    });
    expect(await send('edge0')).toEqual({ kind: 'duplicate', n: 1 });
    const updates = await store.updates();
    expect(updates.map((u) => u.worker)).toEqual(['edge0']);
    expect(updates[0]?.weights.equals(weights(1))).toBe(true);
    expect((await store.workers()).get('edge0')).toMatchObject({ accepted: 1, lastRound: 1 });
    expect(await store.submitted()).toEqual(['edge0']);
  });

  it('refuses an update for another round, on a stale base, or from a worker not selected', async () => {
    expect(await send('edge0', { round: 2 })).toMatchObject({ kind: 'refused', reason: 'future' });
    expect(await send('edge0', { base: 3 })).toMatchObject({
      kind: 'refused',
      reason: 'stale-base',
      detail: '0',
    });
    expect(await send('intruder')).toMatchObject({ kind: 'refused', reason: 'not-selected' });
    expect((await store.state())?.n).toBe(0);
    expect((await store.workers()).get('edge0')?.refused).toBe(2);
  });

  it('is waiting below the quorum before the deadline, and closes on the quorum', async () => {
    await send('edge0');
    expect(await store.claim(1, 'a', t0 + 2000, 10_000)).toMatchObject({ kind: 'waiting', n: 1 });
    await send('edge1');
    expect(await store.claim(1, 'a', t0 + 2000, 10_000)).toEqual({
      kind: 'claimed',
      closedBy: 'quorum',
      n: 2,
    });
    // Claimed: the round takes no update now, but an accepted one resent is still a duplicate.
    expect(await send('edge2')).toMatchObject({ kind: 'refused', reason: 'closed' });
    expect(await send('edge1')).toMatchObject({ kind: 'duplicate' });
  });

  it('closes at the deadline with whoever answered', async () => {
    await send('edge2');
    expect(await store.claim(1, 'a', t0 + 60_000, 10_000)).toEqual({
      kind: 'claimed',
      closedBy: 'deadline',
      n: 1,
    });
  });

  it('holds a claim for its lease; a lapsed claim is taken over and only its taker commits', async () => {
    await send('edge0');
    await send('edge1');
    await send('edge2');
    expect(await store.claim(1, 'dead', t0 + 2000, 5000)).toMatchObject({ closedBy: 'all' });
    expect(await store.claim(1, 'b', t0 + 3000, 5000)).toEqual({
      kind: 'busy',
      untilMs: t0 + 7000,
    });
    // The first claimer died: after its lease the round is claimed again, with all its updates.
    expect(await store.claim(1, 'b', t0 + 8000, 5000)).toMatchObject({ kind: 'claimed', n: 3 });
    expect((await store.updates()).length).toBe(3);
    const next = {
      round: 1,
      outcome: 'next',
      version: 1,
      sha: 'v1',
      selected: workers,
      quorum: 2,
      nowMs: t0 + 9000,
      deadlineMs: t0 + 69_000,
      summary: JSON.stringify({ round: 1, participants: 3 }),
    } as const;
    expect(await store.commit({ ...next, token: 'dead' })).toBe(false);
    expect(await store.commit({ ...next, token: 'b' })).toBe(true);
    // The same commit again (a retry after a lost reply) changes nothing.
    expect(await store.commit({ ...next, token: 'b' })).toBe(false);
    expect(await store.state()).toMatchObject({
      status: 'open',
      round: 2,
      base: 1,
      version: 1,
      sha: 'v1',
      n: 0,
    });
    expect(await store.updates()).toEqual([]);
    expect(await store.history()).toEqual([JSON.stringify({ round: 1, participants: 3 })]);
    // Late now: round 1 is over. The one accepted in round 1 is still a duplicate, not a refusal.
    expect(await send('edge0')).toMatchObject({ kind: 'duplicate' });
    expect(
      await store.offer({
        round: 1,
        worker: 'edge9',
        base: 0,
        meta: '{}',
        weights: weights(0),
        nowMs: t0,
      }),
    ).toMatchObject({
      kind: 'refused',
      reason: 'late',
      detail: '2',
    });
  });

  it("patches a round's history entry where it is, even when a commit moved it meanwhile", async () => {
    const commitRound = async (round: number) => {
      for (const w of workers) await send(w, { round, base: round - 1 });
      await store.claim(round, `t${round}`, t0 + 1000 * round, 5000);
      await store.commit({
        round,
        token: `t${round}`,
        outcome: 'next',
        version: round,
        sha: `v${round}`,
        selected: workers,
        quorum: 2,
        nowMs: t0 + 1000 * round,
        deadlineMs: t0 + 60_000 * round,
        summary: JSON.stringify({ round, participants: 3 }),
      });
    };
    await commitRound(1);
    const history = (await redis.keys())
      .find((k) => k.endsWith(`${job}}:history`))
      ?.slice(redis.prefix.length);
    let moved = false;
    const patched = await store.patchHistory(1, (entry) => {
      const next = JSON.stringify({ ...(JSON.parse(entry) as object), accuracy: 0.5 });
      return next;
    });
    expect(patched).toBe(true);
    // A commit between the read and the write: the first write is refused, the patch read again.
    const racing = store.patchHistory(1, (entry) => {
      if (!moved) {
        // Queued on the connection before the patch's own write: the entry moves to index 1.
        moved = true;
        void redis.client.lpush(history!, JSON.stringify({ round: 2, participants: 3 }));
      }
      return JSON.stringify({ ...(JSON.parse(entry) as object), loss: 2 });
    });
    expect(await racing).toBe(true);
    expect((await store.history()).map((h) => JSON.parse(h) as unknown)).toEqual([
      { round: 2, participants: 3 },
      { round: 1, participants: 3, accuracy: 0.5, loss: 2 },
    ]);
    expect(await store.patchHistory(7, (e) => e)).toBe(false);
  });

  it('opens the same round again when nobody answered by the deadline', async () => {
    expect(await store.claim(1, 'a', t0 + 60_000, 5000)).toMatchObject({
      closedBy: 'deadline',
      n: 0,
    });
    const retry = {
      round: 1,
      token: 'a',
      outcome: 'retry',
      selected: workers,
      quorum: 2,
      nowMs: t0 + 60_000,
      deadlineMs: t0 + 120_000,
    } as const;
    expect(await store.commit(retry)).toBe(true);
    // The model the round trains from is kept (a retry makes no new version).
    expect(await store.state()).toMatchObject({
      status: 'open',
      round: 1,
      deadlineMs: t0 + 120_000,
      version: 0,
      sha: 'v0',
    });
    expect(await send('edge0')).toMatchObject({ kind: 'accepted' });
  });

  it('ends the job: later updates and claims are refused as finished', async () => {
    await send('edge0');
    await send('edge1');
    await store.claim(1, 'a', t0 + 2000, 5000);
    const done = { round: 1, token: 'a', outcome: 'done', version: 1, sha: 'v1' } as const;
    expect(await store.commit({ ...done, nowMs: t0 + 3000, message: 'maxRounds 1 reached' })).toBe(
      true,
    );
    expect(await store.state()).toMatchObject({ status: 'done', message: 'maxRounds 1 reached' });
    expect(await send('edge2')).toMatchObject({ kind: 'refused', reason: 'finished' });
    expect(await store.claim(1, 'b', t0 + 4000, 5000)).toEqual({
      kind: 'finished',
      status: 'done',
    });
  });

  it('records a worker failure beside its counters, the latest replacing the one before', async () => {
    await send('edge0');
    await store.recordFailure('edge0', { atMs: 5, round: 1, exitCode: 2, message: 'no data' });
    await store.recordFailure('edge0', { atMs: 9, round: 1, exitCode: 143, message: 'again' });
    expect((await store.workers()).get('edge0')).toEqual({
      accepted: 1,
      refused: 0,
      lastRound: 1,
      lastSeenMs: t0 + 1000,
      failure: { atMs: 9, round: 1, exitCode: 143, message: 'again' },
    });
  });

  it('keeps model versions as bytes, and drops one', async () => {
    const bytes = new Uint8Array([8, 1, 2, 3, 0, 255]);
    await store.saveModel(0, bytes);
    expect((await store.model(0))?.equals(Buffer.from(bytes))).toBe(true);
    await store.dropModel(0);
    expect(await store.model(0)).toBeUndefined();
  });

  it('keeps two jobs apart', async () => {
    const other = createRoundStore(redis.client, `default/digits/${randomUUID()}`);
    expect(
      (await other.open({ selected: ['x'], quorum: 1, nowMs: t0, deadlineMs: t0 + 1, sha: '' }))
        .created,
    ).toBe(true);
    await send('edge0');
    expect((await other.state())?.n).toBe(0);
    expect(
      await other.offer({
        round: 1,
        worker: 'edge0',
        base: 0,
        meta: '{}',
        weights: weights(0),
        nowMs: t0,
      }),
    ).toMatchObject({
      reason: 'not-selected',
    });
  });
});
