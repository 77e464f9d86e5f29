/**
 * The aset-scheduler's decisions over a real Redis: bindings are idempotent by stream id,
 * capacity is never over-reserved by concurrent replicas, leases end, and every window of T the
 * controller sees the time-averaged eq. (11) features and its choice binds the next streams.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBindingStore } from '../../../shared/aset/binding-store.js';
import type { WindowController } from '../../../shared/aset/window.js';
import {
  LOAD,
  RESPONSES_PER_S,
  STREAMS,
  binOffset,
  featuresPerWorker,
} from '../../../shared/aset/observation.js';
import { createAsetScheduler } from '../../../shared/aset/scheduler.js';
import { streamRequest } from '../../../shared/aset/stream-request.js';
import type { StreamRequest } from '../../../shared/aset/stream-request.js';
import type { SimulationWindow } from '../../../shared/aset/window.js';
import type { PolicyName } from '../../../shared/aset/types.js';
import { ConflictError, ValidationError } from '../../../shared/errors/index.js';
import { tiny } from '../../support/aset.js';
import { testRedis } from '../../support/redis.js';
import type { TestRedis } from '../../support/redis.js';

const topology = tiny('v', true);
const [access, cloud] = topology.workers;

/** 10 queries/s of full size: a fifth of either worker's capacity (50). */
const request = (id: string, overrides: Partial<StreamRequest> = {}): StreamRequest =>
  streamRequest.parse({
    id,
    scheduler: 'ap-0',
    task: 'object-detection',
    maxDelayMs: 200,
    minAccuracy: 30,
    rate: 10,
    size: 1,
    durationS: 60,
    ...overrides,
  });

/** A controller that plays `plan` in turn and remembers the windows it was shown. */
function scripted(plan: PolicyName[]) {
  const seen: Array<SimulationWindow | undefined> = [];
  const controller: WindowController = {
    name: 'scripted',
    choose(previous) {
      seen.push(previous);
      return plan[Math.min(seen.length - 1, plan.length - 1)]!;
    },
  };
  return { controller, seen };
}

describe('aset scheduler', () => {
  let redis: TestRedis;
  let topologyName = 0;
  beforeAll(async () => {
    redis = await testRedis();
  });
  afterAll(() => redis.close());

  /** A scheduler on a fresh key space (its own topology tag) with a settable clock. */
  function setup(plan: PolicyName[] = ['closest'], options: { windowMs?: number } = {}) {
    const clock = { now: 1_000_000 };
    const store = createBindingStore(redis.client, {
      topology: `tiny-${(topologyName += 1)}`,
      workers: topology.workers.length,
      tombstoneMs: 60_000,
      dedupeSeconds: 3600,
    });
    const { controller, seen } = scripted(plan);
    const replica = () =>
      createAsetScheduler({
        topology,
        store,
        controller,
        windowMs: options.windowMs ?? 25_000,
        leaseGraceMs: 0,
        now: () => clock.now,
        uniform: () => 0.5,
      });
    return { clock, store, seen, scheduler: replica(), replica };
  }

  it('binds with the policy in force and answers a retried request with the same binding', async () => {
    const { scheduler, store } = setup(['closest']);
    const first = await scheduler.request(request('cam-1'));
    expect(first).toMatchObject({
      kind: 'bound',
      replay: false,
      placement: { id: 'cam-1', policy: 'closest', worker: { index: access!.index } },
    });
    const again = await scheduler.request(request('cam-1'));
    expect(again).toEqual({ ...first, replay: true });
    expect(Array.from(await store.loads([access!.index, cloud!.index]))).toEqual([10, 0]);
    await expect(scheduler.request(request('cam-1', { rate: 5 }))).rejects.toThrow(ConflictError);
  });

  it('answers two racing copies of one request alike when they compete for the last room', async () => {
    // The copy that finds no room after its twin took it must answer the twin's binding, not a
    // rejection the requester would believe (and then never end the stream).
    for (let race = 0; race < 10; race += 1) {
      const { replica } = setup(['closest']);
      const [a, b] = [replica(), replica()];
      for (let i = 0; i < 9; i += 1) await a.request(request(`fill-${i}`));
      const [x, y] = await Promise.all([a.request(request('last')), b.request(request('last'))]);
      expect([x.kind, y.kind]).toEqual(['bound', 'bound']);
    }
  });

  it('refuses a scheduler the topology does not have, naming the ones it has', async () => {
    const { scheduler } = setup();
    await expect(scheduler.request(request('x', { scheduler: 'ap-9' }))).rejects.toThrow(
      new ValidationError("scheduler: 'ap-9' is not in topology tiny (one of ap-0)"),
    );
  });

  it('never reserves more than a worker can take, whatever the replicas race', async () => {
    const { replica, store } = setup(['closest']);
    const replicas = [replica(), replica(), replica()];
    const outcomes = await Promise.all(
      Array.from({ length: 30 }, (_, i) => replicas[i % 3]!.request(request(`s-${i}`))),
    );
    const bound = outcomes.filter((o) => o.kind === 'bound');
    // 50 of capacity on each of the two workers, 10 per stream: ten streams in all.
    expect(bound).toHaveLength(10);
    const byWorker = [0, 0];
    for (const o of bound) if (o.kind === 'bound') byWorker[o.placement.worker.index]! += 1;
    expect(byWorker).toEqual([5, 5]);
    expect(Array.from(await store.loads([0, 1]))).toEqual([50, 50]);
    const rejected = outcomes.find((o) => o.kind === 'rejected');
    expect(rejected).toMatchObject({ rejection: { reasons: { capacity: 2 } } });
  });

  it('frees the capacity when a stream ends, once, and refuses its id afterwards', async () => {
    const { scheduler, store } = setup(['closest']);
    await scheduler.request(request('a'));
    expect(await scheduler.end('a')).toMatchObject({ id: 'a', worker: { index: 0 } });
    expect(await scheduler.end('a')).toBeUndefined();
    expect(Array.from(await store.loads([0]))).toEqual([0]);
    await expect(scheduler.request(request('a'))).rejects.toThrow(/has ended/);
  });

  it('releases a lease when its duration has passed, on the next tick', async () => {
    const { scheduler, clock, store } = setup(['closest']);
    await scheduler.request(request('short', { durationS: 5 }));
    await scheduler.request(request('long', { durationS: 500 }));
    clock.now += 6_000;
    expect(await scheduler.tick()).toEqual({ policy: 'closest', swept: 1 });
    expect(Array.from(await store.loads([0]))).toEqual([10]);
    await expect(scheduler.find('short')).rejects.toThrow(/not bound/);
    expect((await scheduler.find('long')).worker.index).toBe(0);
  });

  it('refuses a stream whose end arrived before its request', async () => {
    const { scheduler, store } = setup(['closest']);
    expect(await scheduler.end('early')).toBeUndefined();
    await expect(scheduler.request(request('early'))).rejects.toThrow(/has ended/);
    expect(Array.from(await store.loads([0, 1]))).toEqual([0, 0]);
  });

  it('releases expired leases as requests come, not only on the tick', async () => {
    const { scheduler, clock, store } = setup(['closest']);
    for (let i = 0; i < 5; i += 1) await scheduler.request(request(`short-${i}`, { durationS: 1 }));
    expect(Array.from(await store.loads([0]))).toEqual([50]);
    clock.now += 2_000;
    // The access worker is free again for a new stream: no tick ran.
    const next = await scheduler.request(request('next'));
    expect(next).toMatchObject({ placement: { worker: { index: 0 } } });
    expect(Array.from(await store.loads([0]))).toEqual([10]);
  });

  it('explains a rejection by constraint', async () => {
    const { scheduler } = setup();
    const outcome = await scheduler.request(request('tight', { maxDelayMs: 5, minAccuracy: 90 }));
    expect(outcome).toMatchObject({
      kind: 'rejected',
      rejection: { reasons: { task: 0, capacity: 0, delay: 2, accuracy: 2 } },
    });
    const other = await scheduler.request(request('seg', { task: 'segmentation' }));
    expect(other).toMatchObject({ rejection: { reasons: { task: 2 } } });
  });

  it('shows the controller each window time-averaged, and binds the next window with its choice', async () => {
    const { scheduler, clock, seen, store } = setup(['closest', 'farthest'], { windowMs: 10_000 });
    await scheduler.request(request('a', { maxDelayMs: 150, rate: 10 }));
    clock.now += 5_000;
    await scheduler.end('a');
    await store.addResponses({ source: 'agent', id: 'r1' }, [{ worker: 0, responses: 30 }]);
    // A resent report is not counted again.
    await store.addResponses({ source: 'agent', id: 'r1' }, [{ worker: 0, responses: 30 }]);
    clock.now += 5_000;
    const next = await scheduler.request(request('b'));
    expect(next).toMatchObject({ placement: { policy: 'farthest', worker: { index: 1 } } });
    expect(seen).toHaveLength(2);
    expect(seen[0]).toBeUndefined();
    const window = seen[1]!;
    expect(window).toMatchObject({ startMs: 1_000_000, endMs: 1_010_000, policy: 'closest' });
    const features = window.samples[0]!.features;
    expect(features).toHaveLength(topology.workers.length * featuresPerWorker);
    // Bound for 5 of the window's 10 s: half a stream and half its load on average.
    expect(features[STREAMS]).toBeCloseTo(0.5, 6);
    expect(features[LOAD]).toBeCloseTo(5, 6);
    expect(features[binOffset(150, 10)]).toBeCloseTo(5, 6);
    expect(features[RESPONSES_PER_S]).toBeCloseTo(3, 6);
    expect(Array.from(features.subarray(featuresPerWorker)).every((v) => v === 0)).toBe(true);
    expect((await scheduler.status()).policy).toBe('farthest');
  });

  it('keeps scheduling when the meta-policy fails: the first policy, then the one in force', async () => {
    const errors: unknown[] = [];
    let calls = 0;
    const clock = { now: 0 };
    const scheduler = createAsetScheduler({
      topology,
      store: createBindingStore(redis.client, {
        topology: `tiny-${(topologyName += 1)}`,
        workers: topology.workers.length,
        tombstoneMs: 60_000,
        dedupeSeconds: 3600,
      }),
      controller: {
        name: 'flaky',
        choose(previous) {
          calls += 1;
          if (calls === 1 || calls === 3) throw new Error('onnxruntime failed');
          return previous === undefined ? 'cheaper' : 'farthest';
        },
      },
      windowMs: 1_000,
      leaseGraceMs: 0,
      now: () => clock.now,
      uniform: () => 0.5,
      onChoiceError: (error) => errors.push(error),
    });
    expect((await scheduler.tick()).policy).toBe('closest');
    clock.now += 1_000;
    expect((await scheduler.tick()).policy).toBe('farthest');
    clock.now += 1_000;
    // The third choice fails: the window keeps what was in force.
    expect((await scheduler.tick()).policy).toBe('farthest');
    expect((await scheduler.status()).policy).toBe('farthest');
    expect(errors).toHaveLength(2);
  });

  it('rolls a window once, however many replicas find it due', async () => {
    const { replica, clock, seen } = setup(['closest', 'farthest', 'cheaper'], {
      windowMs: 1_000,
    });
    const replicas = [replica(), replica(), replica(), replica()];
    await replicas[0]!.tick();
    clock.now += 1_000;
    const ticks = await Promise.all(replicas.map((r) => r.tick()));
    // One window started and one rolled: the controller chose twice.
    expect(seen).toHaveLength(2);
    expect(ticks.filter((t) => t.policy === 'farthest').length).toBeGreaterThanOrEqual(1);
    expect((await replicas[3]!.tick()).policy).toBe('farthest');
  });
});
