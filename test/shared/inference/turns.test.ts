/**
 * Large requests take turns on the HTTP thread (shared/inference/turns.ts): one piece of large
 * work per turn of the event loop, so a small request's next step runs between two of them; and
 * the pool hands a run's large answers to their callers one per turn (pool.ts); while small
 * work is in flight, large pieces run further apart. Orders and turns, never durations.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { createInferencePool } from '../../../shared/inference/pool.js';
import { createTurns } from '../../../shared/inference/turns.js';
import { loadMnist, pixels } from '../../../shared/training/data.js';

const model = new Uint8Array(readFileSync(new URL('../../../models/edge.onnx', import.meta.url)));

/** Counts turns of the event loop (one setImmediate per turn) until stopped. */
function turnCounter() {
  let turn = 0;
  let running = true;
  const tick = () => {
    turn += 1;
    if (running) setImmediate(tick);
  };
  setImmediate(tick);
  return {
    now: () => turn,
    stop: () => {
      running = false;
    },
  };
}

describe('turns of the HTTP thread', () => {
  it('runs one large piece per turn, with a small request step between two of them', async () => {
    const turn = createTurns();
    const order: string[] = [];
    const large = [1, 2, 3].map((i) => turn().then(() => order.push(`large${i}`)));
    // A small request's steps, each scheduled for the next turn as the handler's would be.
    const small = new Promise<void>((resolve) => {
      let step = 0;
      const next = () => {
        step += 1;
        order.push(`small${step}`);
        if (step < 3) setImmediate(next);
        else resolve();
      };
      setImmediate(next);
    });
    await Promise.all([...large, small]);
    expect(order).toEqual(['large1', 'small1', 'large2', 'small2', 'large3', 'small3']);
  });

  it('gives the next large piece its turn at once when nothing else waits', async () => {
    const turn = createTurns();
    const counter = turnCounter();
    const seen: number[] = [];
    await Promise.all([1, 2, 3].map(() => turn().then(() => seen.push(counter.now()))));
    counter.stop();
    // One per turn: three different turns, in a row.
    expect(seen[1]! - seen[0]!).toBe(1);
    expect(seen[2]! - seen[1]!).toBe(1);
  });
});

describe('turns while small work is in flight', () => {
  /** The turns at which three large pieces ran. */
  async function threePieces(turn: ReturnType<typeof createTurns>): Promise<number[]> {
    const counter = turnCounter();
    const seen: number[] = [];
    await Promise.all([1, 2, 3].map(() => turn().then(() => seen.push(counter.now()))));
    counter.stop();
    return seen;
  }
  const gaps = (seen: number[]) => seen.slice(1).map((t, i) => t - seen[i]!);

  it('runs a large piece only every turnsApart-th turn while a source is busy', async () => {
    const turn = createTurns();
    turn.yieldTo({ busy: () => true, turnsApart: 4 });
    expect(gaps(await threePieces(turn))).toEqual([4, 4]);
  });

  it('runs one per turn while no source is busy, and once the busy one is removed', async () => {
    const turn = createTurns();
    let busy = false;
    const remove = turn.yieldTo({ busy: () => busy, turnsApart: 4 });
    expect(gaps(await threePieces(turn))).toEqual([1, 1]);
    busy = true;
    remove();
    expect(gaps(await threePieces(turn))).toEqual([1, 1]);
  });

  it('keeps the widest spacing among the busy sources', async () => {
    const turn = createTurns();
    turn.yieldTo({ busy: () => true, turnsApart: 2 });
    turn.yieldTo({ busy: () => false, turnsApart: 6 });
    turn.yieldTo({ busy: () => true, turnsApart: 3 });
    expect(gaps(await threePieces(turn))).toEqual([3, 3]);
  });
});

describe('the pool and the turns', () => {
  const { test } = loadMnist();
  const digits = (from: number, rows: number) => ({
    input: {
      datatype: 'FP32' as const,
      shape: [rows, pixels],
      data: test.x.slice(from * pixels, (from + rows) * pixels),
    },
  });
  const makePool = (runs: number[]) =>
    createInferencePool({
      model,
      threads: 1,
      maxBatch: 256,
      maxQueueRows: 4096,
      maxWaitMs: 0,
      onRun: (rows) => runs.push(rows),
    });

  it('answers one run of large requests one per turn, in order, while a small one waits', async () => {
    const runs: number[] = [];
    const pool = await makePool(runs);
    try {
      const counter = turnCounter();
      const answered: Array<{ name: string; turn: number; rows: number }> = [];
      const ask = (name: string, from: number, rows: number) =>
        pool.infer(digits(from, rows), rows).then((out) => {
          answered.push({ name, turn: counter.now(), rows: out['probabilities']!.shape[0]! });
        });
      // Four large requests in one turn share one run, dispatched at the end of the turn...
      const large = [0, 1, 2, 3].map((i) => ask(`large${i}`, i * 64, 64));
      await new Promise((resolve) => setImmediate(resolve));
      // ...and a small one arrives while it runs: it waits for the thread.
      const small = ask('small', 0, 1);
      await Promise.all([...large, small]);
      counter.stop();
      expect(runs).toEqual([256, 1]);
      const turns = answered.filter((a) => a.name.startsWith('large'));
      expect(turns.map((a) => a.name)).toEqual(['large0', 'large1', 'large2', 'large3']);
      for (let i = 1; i < turns.length; i += 1) {
        expect(turns[i]!.turn).toBeGreaterThan(turns[i - 1]!.turn);
      }
      expect(answered.find((a) => a.name === 'small')?.rows).toBe(1);
      expect(turns.every((a) => a.rows === 64)).toBe(true);
    } finally {
      await pool.close();
    }
  });

  it('answers a run of large requests at once when no small one waits', async () => {
    const runs: number[] = [];
    const pool = await makePool(runs);
    try {
      const counter = turnCounter();
      const turns: number[] = [];
      await Promise.all(
        [0, 1, 2, 3].map((i) =>
          pool.infer(digits(i * 64, 64), 64).then(() => turns.push(counter.now())),
        ),
      );
      counter.stop();
      expect(runs).toEqual([256]);
      expect(new Set(turns).size).toBe(1);
    } finally {
      await pool.close();
    }
  });
});
