/**
 * The aggregator against the run's real Redis, with a real (tiny) ONNX model, a fake clock and
 * timer, and trainers that are functions: FedAvg of the round's updates becomes the next model
 * version, rounds close on all / quorum / deadline, nobody answering reopens the round, a
 * missed quorum fails the job when failures are not accepted, the stop condition ends it, and a
 * claim left by a dead aggregator is taken over once its lease lapses — the same updates, once.
 */
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ValidationError } from '../../../shared/errors/index.js';
import { createAggregator } from '../../../shared/fl/aggregator.js';
import type { Aggregator, AggregatorDeps } from '../../../shared/fl/aggregator.js';
import { createRoundStore } from '../../../shared/fl/round-store.js';
import type { RoundStore } from '../../../shared/fl/round-store.js';
import { encodeWeights } from '../../../shared/fl/weights.js';
import type { Tensor } from '../../../shared/fl/weights.js';
import type {
  FlJobConfig,
  RoundStarted,
  RoundSummary,
} from '../../../shared/messages/federated.js';
import { seededRandom } from '../../../shared/random/index.js';
import { Network } from '../../../shared/training/network.js';
import { exportOnnx, readInitializers } from '../../../shared/training/onnx-export.js';
import { capturedTelemetry } from '../../support/http.js';
import { testRedis } from '../../support/redis.js';
import type { TestRedis } from '../../support/redis.js';

const layers = [{ type: 'flatten' }, { type: 'dense', units: 3 }] as const;
const trainers = ['edge0', 'edge1', 'edge2'];

function initialModel(): Uint8Array {
  const network = new Network([1, 2, 2], layers);
  network.initialize(seededRandom(3));
  return exportOnnx(network, 'initial', 'test');
}

function config(over: Partial<FlJobConfig> = {}): FlJobConfig {
  return {
    job: 'default/digits',
    uid: 'u1',
    initialModel: { url: 'file:///models/initial.onnx' },
    trainers: trainers.map((name) => ({
      name,
      node: name,
      url: `http://digits-${name}.default.svc.cluster.local`,
    })),
    round: { minParticipants: 3, timeoutMs: 60_000, acceptFailures: true },
    stop: { maxRounds: 5, patience: 1 },
    training: { epochs: 1, batchSize: 10, learningRate: 0.05, seed: 1, proximalMu: 0 },
    aggregation: { kind: 'fedavg' },
    selection: { fraction: 1, minimum: 1, seed: 1 },
    publicUrl: 'http://digits-aggregator.default.svc.cluster.local',
    ...over,
  };
}

/** A worker's weights: every value `fill`, in the model's names and dims. */
function weightsOf(model: Uint8Array, fill: number): Map<string, Tensor> {
  const out = new Map<string, Tensor>();
  for (const [name, t] of readInitializers(model)) {
    out.set(name, { dims: [...t.dims], values: new Float32Array(t.values.length).fill(fill) });
  }
  return out;
}

describe('the federated aggregator', () => {
  let redis: TestRedis;
  let store: RoundStore;
  let clock: number;
  let timers: Array<{ at: number; fn: () => void; live: boolean }>;
  let told: Array<{ trainer: string; event: RoundStarted }>;
  let announced: RoundSummary[];
  const model0 = initialModel();

  beforeEach(async () => {
    redis = await testRedis();
    store = createRoundStore(redis.client, `default/digits/${randomUUID()}`);
    clock = 1_000_000;
    timers = [];
    told = [];
    announced = [];
  });
  afterEach(() => redis.close());

  function aggregator(
    over: Partial<FlJobConfig> = {},
    deps: Partial<AggregatorDeps> = {},
  ): Aggregator {
    return createAggregator({
      config: config(over),
      store,
      initialModel: () => Promise.resolve(model0),
      notify: (trainer, event) => {
        told.push({ trainer: trainer.name, event });
        return Promise.resolve();
      },
      announce: (summary) => {
        announced.push(summary);
        return Promise.resolve();
      },
      now: () => clock,
      schedule: (at, fn) => {
        const timer = { at, fn, live: true };
        timers.push(timer);
        return () => {
          timer.live = false;
        };
      },
      log: capturedTelemetry('fl-aggregator').log,
      leaseMs: 5000,
      maxUpdateBytes: 1 << 20,
      ...deps,
    });
  }

  /** Moves the clock to `at` and runs the timers due by then. */
  async function advance(agg: Aggregator, at: number): Promise<void> {
    clock = at;
    for (const timer of timers.filter((t) => t.live && t.at <= at)) {
      timer.live = false;
      timer.fn();
    }
    await agg.tick();
  }

  const send = (
    agg: Aggregator,
    worker: string,
    fill: number,
    samples: number,
    round = 1,
    base = round - 1,
  ) =>
    agg.offer({
      worker,
      round,
      base,
      meta: { samples, loss: fill, trainMs: 100 * samples },
      weights: encodeWeights(weightsOf(model0, fill)),
    });

  it('settles once its warm-up is done, before round 1 opens, and again when resumed', async () => {
    // The round the store holds when each settles (read at once: one connection keeps order).
    const settled: Array<Promise<number | undefined>> = [];
    const settle = () => {
      settled.push(store.state().then((state) => state?.round));
    };
    await aggregator({}, { settle }).start();
    await aggregator({}, { settle }).start();
    // The first settled before the store held a round; the second, resuming, found round 1.
    expect(await Promise.all(settled)).toEqual([undefined, 1]);
  });

  it('opens round 1 and tells every trainer, with the model to train and its sha256', async () => {
    const agg = aggregator();
    await agg.start();
    expect(told.map((t) => t.trainer)).toEqual(trainers);
    expect(told[0]?.event).toMatchObject({
      job: 'default/digits',
      round: 1,
      base: 0,
      model: { url: 'http://digits-aggregator.default.svc.cluster.local/v1/models/0' },
    });
    expect((await agg.model(0))?.equals(Buffer.from(model0))).toBe(true);
    expect(await agg.round()).toMatchObject({ status: 'open', selected: trainers, submitted: [] });
  });

  it('averages the round by samples into version 1 (hand-computed), then opens round 2', async () => {
    const agg = aggregator();
    await agg.start();
    told = [];
    expect(await send(agg, 'edge0', 1, 10)).toMatchObject({ kind: 'accepted', n: 1 });
    await send(agg, 'edge1', 2, 30);
    await send(agg, 'edge2', 4, 60);
    await agg.tick();
    const state = await store.state();
    expect(state).toMatchObject({ status: 'open', round: 2, base: 1, version: 1 });
    const averaged = readInitializers((await agg.model(1))!);
    const expected = (1 * 10 + 2 * 30 + 4 * 60) / 100;
    for (const tensor of averaged.values()) {
      for (const v of tensor.values) expect(Math.abs(v - expected)).toBeLessThanOrEqual(1e-6);
    }
    expect(announced[0]).toMatchObject({
      round: 1,
      version: 1,
      participants: 3,
      closedBy: 'all',
      stragglers: [],
    });
    expect(announced[0]?.loss).toBeCloseTo(expected, 6);
    expect(told.map((t) => [t.trainer, t.event.round, t.event.base])).toEqual(
      trainers.map((t) => [t, 2, 1]),
    );
  });

  it('asks a seeded fraction of the trainers each round, and only tells those', async () => {
    const many = Array.from({ length: 20 }, (_, i) => `edge${String(i).padStart(2, '0')}`);
    const job = {
      trainers: many.map((name) => ({ name, node: name, url: `http://${name}` })),
      round: { minParticipants: 20, timeoutMs: 60_000, acceptFailures: true },
      selection: { fraction: 0.1, minimum: 1, seed: 7 },
    };
    const agg = aggregator(job);
    await agg.start();
    const first = (await store.state())?.selected ?? [];
    expect(first).toHaveLength(2);
    expect(told.map((t) => t.trainer)).toEqual(first);
    // The quorum is of the selected: their two updates close the round.
    for (const worker of first) await send(agg, worker, 1, 10);
    expect(
      await send(
        agg,
        many.find((w) => !first.includes(w))!,
        1,
        10,
      ),
    ).toMatchObject({
      kind: 'refused',
    });
    await agg.tick();
    const second = (await store.state())?.selected ?? [];
    expect(second).toHaveLength(2);
    expect(second).not.toEqual(first);
    // Another replica (or a restart) draws the same rounds.
    const again = createRoundStore(redis.client, `default/digits/${randomUUID()}`);
    store = again;
    told = [];
    await aggregator(job).start();
    expect((await store.state())?.selected).toEqual(first);
  });

  it('aggregates with Krum: the poisoned update is left out and named in the summary', async () => {
    const agg = aggregator({ aggregation: { kind: 'krum', f: 1, m: 1 } });
    await agg.start();
    await send(agg, 'edge0', 1, 10);
    await send(agg, 'edge1', 1.1, 10);
    await send(agg, 'edge2', -500, 10);
    await agg.tick();
    const averaged = readInitializers((await agg.model(1))!);
    for (const tensor of averaged.values())
      for (const v of tensor.values)
        expect([1, 1.1].some((x) => Math.abs(v - x) <= 1e-6)).toBe(true);
    expect(announced[0]?.rejected?.map((r) => r.worker)).toContain('edge2');
    expect(JSON.stringify(announced[0])).not.toMatch(/-500/);
  });

  it('carries the FedAdam moments from round to round through the store, as a restart finds them', async () => {
    const fedadam = {
      kind: 'fedadam',
      eta: 0.1,
      beta1: 0.9,
      beta2: 0.99,
      tau: 1e-9,
    } as const;
    const agg = aggregator({ aggregation: fedadam });
    await agg.start();
    for (const w of trainers) await send(agg, w, 1, 10);
    await agg.tick();
    expect(await store.strategyState(1)).toMatch(/moments/);
    // A new process (nothing in memory) aggregates round 2 from the stored moments.
    const fresh = aggregator({ aggregation: fedadam });
    await fresh.start();
    for (const w of trainers) await send(fresh, w, 1, 10, 2, 1);
    await fresh.tick();
    const restarted = readInitializers((await store.model(2))!);
    // The same two rounds in one process give the same bytes.
    const other = createRoundStore(redis.client, `default/digits/${randomUUID()}`);
    store = other;
    const one = aggregator({ aggregation: fedadam });
    await one.start();
    for (const w of trainers) await send(one, w, 1, 10);
    await one.tick();
    for (const w of trainers) await send(one, w, 1, 10, 2, 1);
    await one.tick();
    const continuous = readInitializers((await store.model(2))!);
    for (const [name, t] of continuous) expect(restarted.get(name)?.values).toEqual(t.values);
  });

  it('clips and noises under central DP, naming the clipped updates and the epsilon spent', async () => {
    const dp = {
      kind: 'dp-fixed-clipping',
      noiseMultiplier: 1,
      clippingNorm: 0.5,
      delta: 1e-5,
      sampled: 3,
      inner: { kind: 'fedavg' },
    } as const;
    const agg = aggregator({ aggregation: dp });
    await agg.start();
    await send(agg, 'edge0', 5, 10);
    await send(agg, 'edge1', 5, 10);
    await send(agg, 'edge2', 5, 10);
    await agg.tick();
    const summary = announced[0]!;
    expect(summary.clipped?.map((c) => c.worker)).toEqual(trainers);
    expect(summary.epsilon).toBeGreaterThan(0);
    // Round 2 has spent more.
    for (const w of trainers) await send(agg, w, 5, 10, 2, 1);
    await agg.tick();
    expect(announced[1]!.epsilon).toBeGreaterThan(summary.epsilon!);
    // The noise seed is the store's secret, not in the summary or the config.
    const seed = await store.secretSeed();
    expect(JSON.stringify(announced)).not.toContain(String(seed));
  });

  it('evaluates the initial model before round 1 opens, then each new model, and stops at the target', async () => {
    const evaluated: Uint8Array[] = [];
    const telemetry = capturedTelemetry('fl-aggregator');
    const agg = aggregator(
      {
        stop: { maxRounds: 5, patience: 1, targetAccuracy: 0.9 },
        evaluation: { url: 'file:///data/eval.csv', format: 'csv' },
      },
      {
        log: telemetry.log,
        evaluate: (model) => {
          evaluated.push(model);
          return Promise.resolve({ accuracy: [0.5, 0.7, 0.9][evaluated.length - 1] ?? 0, loss: 1 });
        },
      },
    );
    await agg.start();
    expect(evaluated).toEqual([model0]);
    expect(telemetry.lines).toContainEqual(
      expect.objectContaining({ msg: 'the initial model evaluated', accuracy: 0.5 }),
    );
    for (const w of trainers) await send(agg, w, 1, 10);
    await agg.tick();
    expect(announced[0]).toMatchObject({ round: 1, accuracy: 0.7 });
    expect((await store.state())?.status).toBe('open');
    for (const w of trainers) await send(agg, w, 1, 10, 2, 1);
    await agg.tick();
    expect(announced[1]).toMatchObject({ round: 2, accuracy: 0.9 });
    expect(await store.state()).toMatchObject({ status: 'done', version: 2 });
    expect((await store.state())?.message).toMatch(/reached targetAccuracy 0.9/);
  });

  it('without a stop condition on it, evaluates a round beside the next one and adds the figures to its history entry', async () => {
    const pending: Array<(accuracy: number) => void> = [];
    const agg = aggregator(
      {
        stop: { maxRounds: 3, patience: 1 },
        evaluation: { url: 'file:///data/eval.csv', format: 'csv' },
      },
      {
        evaluate: () =>
          new Promise((resolve) => pending.push((accuracy) => resolve({ accuracy, loss: 2 }))),
      },
    );
    const starting = agg.start();
    // Round 1 opens once the initial model is measured.
    await vi.waitFor(() => expect(pending).toHaveLength(1));
    expect(await store.state()).toBeUndefined();
    pending.shift()?.(0.1);
    await starting;
    for (const w of trainers) await send(agg, w, 1, 10);
    await agg.tick();
    // Round 2 opened and was told while round 1's model is still being measured.
    expect(await store.state()).toMatchObject({ status: 'open', round: 2 });
    expect(told.filter((t) => t.event.round === 2)).toHaveLength(trainers.length);
    const entry = async () => JSON.parse((await store.history())[0]!) as RoundSummary;
    expect(await entry()).not.toHaveProperty('accuracy');
    expect(announced).toEqual([]);
    expect(pending).toHaveLength(1);
    pending.shift()?.(0.6);
    await vi.waitFor(async () => expect(await entry()).toMatchObject({ round: 1, accuracy: 0.6 }));
    expect(announced).toEqual([expect.objectContaining({ round: 1, accuracy: 0.6, loss: 2 })]);
    // The last round is measured before the job ends: its status has the final figures.
    for (const w of trainers) await send(agg, w, 1, 10, 2, 1);
    await agg.tick();
    pending.shift()?.(0.7);
    for (const w of trainers) await send(agg, w, 1, 10, 3, 2);
    const closing = agg.tick();
    await vi.waitFor(() => expect(pending).toHaveLength(1));
    expect((await store.state())?.status).toBe('aggregating');
    pending.shift()?.(0.8);
    await closing;
    expect(await store.state()).toMatchObject({ status: 'done', version: 3 });
    const rounds = (await store.history()).map((h) => JSON.parse(h) as RoundSummary);
    expect(rounds.map((r) => [r.round, r.accuracy])).toEqual([
      [3, 0.8],
      [2, 0.7],
      [1, 0.6],
    ]);
  });

  it('a restarted aggregator measures the latest model whose evaluation was lost', async () => {
    let evaluations = 0;
    const first = aggregator(
      { stop: { maxRounds: 3, patience: 1 }, evaluation: { url: 'file:///e.csv', format: 'csv' } },
      {
        // The initial model's ends; round 1's never does: the process "dies" first.
        evaluate: () =>
          (evaluations += 1) === 1
            ? Promise.resolve({ accuracy: 0.1, loss: 2 })
            : new Promise(() => {}),
      },
    );
    await first.start();
    for (const w of trainers) await send(first, w, 1, 10);
    await first.tick();
    first.close();
    const again = aggregator(
      { stop: { maxRounds: 3, patience: 1 }, evaluation: { url: 'file:///e.csv', format: 'csv' } },
      { evaluate: () => Promise.resolve({ accuracy: 0.42, loss: 1.5 }) },
    );
    await again.start();
    await vi.waitFor(async () =>
      expect(JSON.parse((await store.history())[0]!)).toMatchObject({ round: 1, accuracy: 0.42 }),
    );
  });

  it('FedBuff: steps every bufferSize updates from any trainer, a stale one weighted 1/sqrt(1 + s) (hand-computed), an older one refused', async () => {
    const agg = aggregator({
      aggregation: {
        kind: 'fedbuff',
        bufferSize: 2,
        maxStaleness: 1,
        stalenessExponent: 0.5,
        eta: 1,
      },
      round: { minParticipants: 1, timeoutMs: 60_000, acceptFailures: true },
    });
    await agg.start();
    expect(told.map((t) => t.event.maxStaleness)).toEqual([1, 1, 1]);
    await send(agg, 'edge0', 1, 10);
    expect(await send(agg, 'edge1', 3, 30)).toMatchObject({ kind: 'accepted', n: 2 });
    await agg.tick();
    // Step 1: both fresh, weight 1: the samples-weighted mean (1*10 + 3*30) / 40.
    expect(await store.state()).toMatchObject({ status: 'open', round: 2, base: 1, version: 1 });
    for (const t of readInitializers((await agg.model(1))!).values())
      for (const v of t.values) expect(Math.abs(v - 2.5)).toBeLessThanOrEqual(1e-6);
    // Every trainer is told round 2; edge2, still training from version 0, is not stopped (its
    // trainer keeps at it: the event says how stale an update may be).
    expect(await agg.round()).toMatchObject({ round: 2, base: 1, maxStaleness: 1 });
    // edge2's update trained from version 0 (named round 1, as it was told) joins round 2's buffer.
    expect(await send(agg, 'edge2', 5, 20, 1, 0)).toMatchObject({ kind: 'accepted', n: 1 });
    expect(await send(agg, 'edge2', 5, 20, 1, 0)).toMatchObject({ kind: 'duplicate' });
    expect(await send(agg, 'edge2', 6, 20, 2, 1)).toMatchObject({
      kind: 'refused',
      reason: 'buffered',
    });
    expect(await send(agg, 'edge0', 4, 20, 2, 1)).toMatchObject({ kind: 'accepted', n: 2 });
    await agg.tick();
    // Step 2: edge2's change from version 0 (5 - v0) at weight 1/sqrt(2), edge0's from version 1
    // (4 - 2.5) at weight 1, by samples 20 and 20, added to version 1.
    const v0 = readInitializers(model0);
    const v2 = readInitializers((await agg.model(2))!);
    for (const [name, t] of v2) {
      t.values.forEach((v, i) => {
        const start = v0.get(name)!.values[i]!;
        const expected = 2.5 + ((5 - start) / Math.SQRT2 + (4 - 2.5)) / 2;
        expect(Math.abs(v - expected)).toBeLessThanOrEqual(1e-6);
      });
    }
    // A step waits for nobody: no stragglers.
    expect(announced[1]).toMatchObject({ round: 2, participants: 2, stragglers: [] });
    // Version 2's buffer: an update from version 0 is now 2 behind (max 1).
    expect(await send(agg, 'edge0', 7, 10, 1, 0)).toMatchObject({
      kind: 'refused',
      reason: 'stale-base',
      detail: '2',
    });
    expect(await send(agg, 'edge2', 5, 20, 1, 0)).toMatchObject({ kind: 'duplicate' });
    expect(await send(agg, 'edge1', 1, 10, 3, 3)).toMatchObject({
      kind: 'refused',
      reason: 'future',
    });
  });

  it('closes on its quorum; a straggler after that is told the round is over', async () => {
    const agg = aggregator({
      round: { minParticipants: 2, timeoutMs: 60_000, acceptFailures: true },
    });
    await agg.start();
    await send(agg, 'edge0', 1, 10);
    await send(agg, 'edge1', 1, 10);
    await agg.tick();
    expect(announced[0]).toMatchObject({ closedBy: 'quorum', stragglers: ['edge2'] });
    expect(await send(agg, 'edge2', 1, 10)).toMatchObject({ kind: 'refused', reason: 'late' });
  });

  it('closes at the deadline with whoever answered', async () => {
    const agg = aggregator();
    await agg.start();
    await send(agg, 'edge1', 1, 10);
    await advance(agg, clock + 59_999);
    expect((await store.state())?.round).toBe(1);
    await advance(agg, clock + 1);
    expect(announced[0]).toMatchObject({
      closedBy: 'deadline',
      participants: 1,
      stragglers: ['edge0', 'edge2'],
    });
  });

  it('opens the round again, telling its trainers again, when nobody answered', async () => {
    const agg = aggregator();
    await agg.start();
    told = [];
    await advance(agg, clock + 60_000);
    expect(await store.state()).toMatchObject({
      status: 'open',
      round: 1,
      deadlineMs: clock + 60_000,
    });
    expect(told.map((t) => t.trainer)).toEqual(trainers);
  });

  it('fails the job on a missed quorum when failures are not accepted', async () => {
    const agg = aggregator({
      round: { minParticipants: 2, timeoutMs: 1000, acceptFailures: false },
    });
    await agg.start();
    await send(agg, 'edge0', 1, 10);
    await advance(agg, clock + 1000);
    const state = await store.state();
    expect(state?.status).toBe('failed');
    expect(state?.message).toMatch(/had 1 of the 2 updates its quorum needs/);
  });

  it('ends the job at maxRounds, keeping the last model', async () => {
    const agg = aggregator({ stop: { maxRounds: 2, patience: 1 } });
    await agg.start();
    for (const round of [1, 2]) {
      for (const worker of trainers) await send(agg, worker, round, 10, round);
      await agg.tick();
    }
    const state = await store.state();
    expect(state).toMatchObject({ status: 'done', version: 2, message: 'maxRounds 2 reached' });
    expect(await agg.model(2)).toBeDefined();
    expect(await agg.model(0)).toBeUndefined();
    expect(announced.map((s) => s.round)).toEqual([1, 2]);
  });

  it('resumes a job a restarted aggregator finds in its store, telling only the trainers still due', async () => {
    const first = aggregator();
    await first.start();
    await send(first, 'edge0', 1, 10);
    first.close();
    told = [];
    const restarted = aggregator();
    await restarted.start();
    expect(await store.state()).toMatchObject({ round: 1, n: 1 });
    expect(told.map((t) => t.trainer)).toEqual(['edge1', 'edge2']);
  });

  it('takes over the claim of an aggregator that died mid-aggregation, after its lease, once', async () => {
    const agg = aggregator();
    await agg.start();
    for (const worker of trainers)
      await store.offer({
        round: 1,
        worker,
        base: 0,
        meta: JSON.stringify({ samples: 10 }),
        weights: Buffer.from(encodeWeights(weightsOf(model0, 2))),
        nowMs: clock,
      });
    // The dead aggregator's claim: it never commits.
    expect(await store.claim(1, 'dead', clock, 5000)).toMatchObject({ kind: 'claimed' });
    await agg.tick();
    expect((await store.state())?.status).toBe('aggregating');
    await advance(agg, clock + 5000);
    expect(await store.state()).toMatchObject({ status: 'open', round: 2, version: 1 });
    expect(announced.map((s) => [s.round, s.participants])).toEqual([[1, 3]]);
    expect(
      await store.commit({
        round: 1,
        token: 'dead',
        outcome: 'failed',
        nowMs: clock,
        message: 'x',
      }),
    ).toBe(false);
  });

  it("hands an update's bytes back at once when it is not kept, after its round's step when it is", async () => {
    const released: Uint8Array[] = [];
    const agg = aggregator(
      { round: { minParticipants: 2, timeoutMs: 60_000, acceptFailures: true } },
      { release: (bytes) => released.push(bytes) },
    );
    await agg.start();
    const update = (worker: string, fill: number) => ({
      worker,
      round: 1,
      base: 0,
      meta: { samples: 10 },
      weights: encodeWeights(weightsOf(model0, fill)),
    });
    const first = update('edge0', 1);
    expect(await agg.offer(first)).toMatchObject({ kind: 'accepted' });
    // Kept: the round's step reads its decoded weights, views of these bytes.
    expect(released).toEqual([]);
    const again = update('edge0', 1);
    expect(await agg.offer(again)).toMatchObject({ kind: 'duplicate' });
    expect(released).toEqual([again.weights]);
    const wrong = {
      ...update('edge1', 1),
      weights: encodeWeights(
        new Map([['dense1.weight', { dims: [2, 2], values: new Float32Array(4) }]]),
      ),
    };
    await expect(agg.offer(wrong)).rejects.toThrow(ValidationError);
    expect(released).toEqual([again.weights, wrong.weights]);
    const second = update('edge1', 3);
    await agg.offer(second);
    await agg.tick();
    expect(await store.state()).toMatchObject({ round: 2, version: 1 });
    // Stepped: both kept updates handed back, each once, and the average made from them.
    expect(released).toEqual([again.weights, wrong.weights, first.weights, second.weights]);
    for (const tensor of readInitializers((await agg.model(1))!).values())
      for (const v of tensor.values) expect(v).toBeCloseTo(2, 6);
    const late = update('edge2', 1);
    expect(await agg.offer(late)).toMatchObject({ kind: 'refused', reason: 'late' });
    expect(released.at(-1)).toBe(late.weights);
  });

  it('refuses an update whose tensors do not fit the model, naming them', async () => {
    const agg = aggregator();
    await agg.start();
    const wrong = new Map([['dense1.weight', { dims: [2, 2], values: new Float32Array(4) }]]);
    await expect(
      agg.offer({
        worker: 'edge0',
        round: 1,
        base: 0,
        meta: { samples: 1 },
        weights: encodeWeights(wrong),
      }),
    ).rejects.toThrow(ValidationError);
    expect((await store.state())?.n).toBe(0);
  });

  it('records a trainer failure for the controller to judge', async () => {
    const agg = aggregator();
    await agg.start();
    await agg.reportFailure({
      job: 'default/digits',
      worker: 'edge1',
      round: 1,
      exitCode: 2,
      message: 'no dataset',
    });
    expect((await store.workers()).get('edge1')?.failure).toEqual({
      atMs: clock,
      round: 1,
      exitCode: 2,
      message: 'no dataset',
    });
  });
});
