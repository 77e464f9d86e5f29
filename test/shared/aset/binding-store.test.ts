/**
 * The binding store's Lua against a plain model, on a real Redis: after any sequence of binds,
 * releases, lease sweeps and clock moves, the reserved load is the sum of the live bindings', and
 * a rolled window's features are the time averages of the eq. (11) values (property).
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBindingStore } from '../../../shared/aset/binding-store.js';
import type { BindingRecord } from '../../../shared/aset/binding-store.js';
import { reserve } from '../../../shared/aset/lua/index.js';
import {
  BINS,
  LOAD,
  RESPONSES_PER_S,
  STREAMS,
  featuresPerWorker,
} from '../../../shared/aset/observation.js';
import { testRedis } from '../../support/redis.js';
import type { TestRedis } from '../../support/redis.js';

const workers = 3;

type Op =
  | { kind: 'bind'; worker: number; rate: number; size: number; cell: number; lease: number }
  | { kind: 'release'; pick: number }
  | { kind: 'advance'; ms: number }
  | { kind: 'sweep' };

const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    kind: fc.constant('bind' as const),
    worker: fc.integer({ min: 0, max: workers - 1 }),
    rate: fc.constantFrom(2, 5, 10, 25, 30),
    size: fc.constantFrom(0.3, 0.65, 1),
    cell: fc.integer({ min: BINS, max: featuresPerWorker - 1 }),
    lease: fc.integer({ min: 1, max: 20_000 }),
  }),
  fc.record({ kind: fc.constant('release' as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 1, max: 5_000 }) }),
  fc.record({ kind: fc.constant('sweep' as const) }),
);

describe('binding store', () => {
  let redis: TestRedis;
  let run = 0;
  beforeAll(async () => {
    redis = await testRedis();
  });
  afterAll(() => redis.close());

  it("lays out a worker's features in Lua as observation.ts does", () => {
    // lua/includes/prelude.lua spells the offsets out; the property below would catch most
    // mismatches, this one names it.
    const layout = /^local FEATURES, STREAMS, RESPONSES, LOAD = (\d+), (\d+), (\d+), (\d+)$/m;
    expect(layout.exec(reserve.lua)?.slice(1).map(Number)).toEqual([
      featuresPerWorker,
      STREAMS,
      RESPONSES_PER_S,
      LOAD,
    ]);
  });

  it('keeps loads and time-averaged features exact under any sequence (property)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 25 }), async (ops) => {
        const store = createBindingStore(redis.client, {
          topology: `prop-${(run += 1)}`,
          workers,
          tombstoneMs: 1_000_000,
          dedupeSeconds: 3600,
        });
        const start = 1_000_000;
        let now = start;
        await store.window(now, 1);
        // The model: live bindings, and per worker the integral of each feature since `start`.
        const live = new Map<string, BindingRecord>();
        const value = () =>
          Array.from({ length: workers }, () => new Float64Array(featuresPerWorker));
        const current = value();
        const integral = value();
        const advance = (to: number) => {
          for (let w = 0; w < workers; w += 1) {
            for (let f = 0; f < featuresPerWorker; f += 1) {
              integral[w]![f]! += current[w]![f]! * (to - now);
            }
          }
          now = to;
        };
        const drop = (record: BindingRecord) => {
          live.delete(record.id);
          const row = current[record.worker]!;
          row[STREAMS]! -= 1;
          if (row[STREAMS] === 0) row.fill(0);
          else {
            row[LOAD]! -= Number(record.delta);
            row[record.cell]! -= Number(record.rate);
          }
        };
        let n = 0;
        for (const o of ops) {
          if (o.kind === 'bind') {
            const record: BindingRecord = {
              id: `s${(n += 1)}`,
              worker: o.worker,
              scheduler: 'ap-0',
              policy: 'closest',
              fingerprint: 'f',
              delta: String(o.size * o.rate),
              rate: String(o.rate),
              cell: o.cell,
              expectedMs: 1,
              boundAtMs: now,
              expiresAtMs: now + o.lease,
            };
            expect(await store.reserve(record, Infinity, now)).toEqual({ kind: 'bound' });
            live.set(record.id, record);
            const row = current[o.worker]!;
            row[STREAMS]! += 1;
            row[LOAD]! += o.size * o.rate;
            row[o.cell]! += o.rate;
          } else if (o.kind === 'release') {
            const ids = [...live.keys()];
            const id = ids.length === 0 ? 'none' : ids[o.pick % ids.length]!;
            const released = await store.release(id, now);
            expect(released?.id).toBe(live.get(id)?.id);
            if (released !== undefined) drop(released);
          } else if (o.kind === 'advance') {
            advance(now + o.ms);
          } else {
            const due = [...live.values()].filter((r) => r.expiresAtMs <= now);
            expect(await store.sweep(now, 1_000)).toBe(due.length);
            due.forEach(drop);
          }
        }
        const loads = await store.loads([0, 1, 2]);
        for (let w = 0; w < workers; w += 1) {
          expect(loads[w]).toBeCloseTo(current[w]![LOAD]!, 9);
        }
        advance(now + 1);
        const rolled = await store.window(now, 1);
        expect(rolled.kind).toBe('rolled');
        if (rolled.kind !== 'rolled') return;
        for (let w = 0; w < workers; w += 1) {
          for (let f = 0; f < featuresPerWorker; f += 1) {
            const expected = f === RESPONSES_PER_S ? 0 : integral[w]![f]! / (now - start);
            expect(rolled.features[w * featuresPerWorker + f]).toBeCloseTo(expected, 3);
          }
        }
      }),
      { numRuns: 60 },
    );
  });

  it('stores a window policy only for the window it was chosen for', async () => {
    const store = createBindingStore(redis.client, {
      topology: 'policy',
      workers,
      tombstoneMs: 1000,
      dedupeSeconds: 3600,
    });
    const started = await store.window(0, 100);
    expect(started).toEqual({ kind: 'started', startMs: 0 });
    expect(await store.setPolicy(0, 'farthest')).toBe(true);
    expect(await store.window(50, 100)).toEqual({
      kind: 'current',
      startMs: 0,
      policy: 'farthest',
    });
    expect(await store.window(100, 100)).toMatchObject({ kind: 'rolled', startMs: 0, endMs: 100 });
    // A slow replica's choice for the window that has just ended is refused.
    expect(await store.setPolicy(0, 'cheaper')).toBe(false);
    expect(await store.setPolicy(100, 'cheaper')).toBe(true);
  });
});
