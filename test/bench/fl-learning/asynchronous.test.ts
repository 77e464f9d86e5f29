/**
 * bench/fl-learning's FedBuff on a simulated clock: trainer speeds spread evenly over a seeded
 * shuffle; a synchronous round lasts as long as its slowest trainer; FedBuff steps every K
 * updates through shared/fl/strategy/fedbuff (its first step, from fresh updates, is the mean of
 * the deltas), refuses updates past the max staleness with the reason, and gives the same run
 * every time.
 */
import { describe, expect, it } from 'vitest';
import {
  runFedBuff,
  synchronousClock,
  timeToTarget,
  trainerSpeeds,
} from '../../../bench/fl-learning/asynchronous.js';
import type { AsyncOptions, TimedPoint } from '../../../bench/fl-learning/asynchronous.js';
import { buildClients, initialModel, subset } from '../../../bench/fl-learning/federation.js';
import { jobSelector } from '../../../bench/fl-learning/setup.js';
import { inProcessTrainer } from '../../../bench/fl-learning/simulate.js';
import { fedAvg } from '../../../shared/fl/fedavg.js';
import { localTrain } from '../../../shared/fl/local-train.js';
import { selectClients } from '../../../shared/fl/strategy/selection.js';
import { layers, syntheticSplit } from './synthetic.js';
import { readInitializers } from '../../../shared/training/onnx-export.js';

const data = syntheticSplit();
const clients = buildClients(data.y, 'iid', 6, 1);
const names = clients.map((c) => c.name);
const local = { epochs: 1, batchSize: 5, learningRate: 0.1, seed: 3 };

function options(overrides: Partial<AsyncOptions> = {}): AsyncOptions {
  return {
    clients,
    initialModel: initialModel(layers, 'tiny', 1),
    local,
    speeds: trainerSpeeds(names, 10, 1),
    bufferSize: 2,
    maxStaleness: 10,
    concurrency: 3,
    serverLr: 1,
    seed: 1,
    maxSteps: 6,
    target: 2,
    ...overrides,
  };
}

describe('trainerSpeeds', () => {
  it('spreads 1x to the slowest evenly over a seeded shuffle of the clients', () => {
    const speeds = trainerSpeeds(names, 10, 1);
    expect([...speeds.values()].sort((a, b) => a - b)).toEqual([1, 2.8, 4.6, 6.4, 8.2, 10]);
    expect([...speeds.keys()].sort()).toEqual([...names].sort());
    expect(trainerSpeeds(names, 10, 1)).toEqual(speeds);
    expect([...trainerSpeeds(names, 10, 2)]).not.toEqual([...speeds]);
    expect(() => trainerSpeeds(names, 0.5, 1)).toThrow(/slowest/);
  });
});

describe('synchronousClock', () => {
  it('ends each round when its slowest selected trainer is done', () => {
    const speeds = trainerSpeeds(names, 10, 1);
    const select = jobSelector(0.5, 1);
    const slowest = (round: number) =>
      Math.max(...select(names, round).map((w) => speeds.get(w) ?? NaN));
    expect(synchronousClock(names, select, speeds, 3)).toEqual([
      slowest(1),
      slowest(1) + slowest(2),
      slowest(1) + slowest(2) + slowest(3),
    ]);
  });
});

describe('runFedBuff', () => {
  const train = inProcessTrainer(data, layers);
  const evaluations = () => {
    const models: Uint8Array[] = [];
    const evaluate = (model: Uint8Array) => {
      models.push(model);
      return Promise.resolve({ accuracy: 0.1 * models.length, loss: 0 });
    };
    return { models, evaluate };
  };

  it('steps every K updates, on a clock that never goes back', async () => {
    const result = await runFedBuff(options(), { train, evaluate: evaluations().evaluate });
    expect(result.steps).toBe(6);
    expect(result.curve.map((p) => p.round)).toEqual([0, 1, 2, 3, 4, 5, 6]);
    const times = result.curve.map((p) => p.time);
    expect(times).toEqual([...times].sort((a, b) => a - b));
    expect(result.staleness).toHaveLength(12);
    expect(Math.max(...result.staleness)).toBeGreaterThan(0);
    expect(result.refused).toEqual([]);
  });

  it('makes its first step the mean of the first K deltas (equal speeds: name order)', async () => {
    const { models, evaluate } = evaluations();
    const opts = options({ speeds: trainerSpeeds(names, 1, 1), maxSteps: 1 });
    const result = await runFedBuff(opts, { train, evaluate });
    expect(result.curve[1]?.time).toBe(1);
    // The three first trainers, drawn one at a time from the idle ones; ties finish in name order.
    const first: string[] = [];
    for (let draw = 1; draw <= 3; draw += 1) {
      const idle = names.filter((n) => !first.includes(n));
      first.push(
        ...selectClients({ available: idle, fraction: 0, minimum: 1, seed: 1, round: draw }),
      );
    }
    const updates = [...first]
      .sort()
      .slice(0, 2)
      .map((worker) => {
        const indices = clients.find((c) => c.name === worker)?.indices ?? [];
        const u = localTrain(opts.initialModel, layers, subset(data, indices), local);
        return { worker, samples: u.samples, weights: u.weights };
      });
    const mean = fedAvg(readInitializers(opts.initialModel), updates);
    const stepped = readInitializers(models[1] ?? new Uint8Array());
    for (const [name, tensor] of mean) {
      const got = stepped.get(name)?.values ?? new Float32Array();
      tensor.values.forEach((v, i) => expect(got[i]).toBeCloseTo(v, 6));
    }
  });

  it('refuses updates past the max staleness, with the reason', async () => {
    const result = await runFedBuff(options({ maxStaleness: 0 }), {
      train,
      evaluate: evaluations().evaluate,
    });
    expect(result.refused.length).toBeGreaterThan(0);
    expect(result.refused[0]?.reason).toMatch(/is \d+ versions stale; max 0/);
    expect(result.staleness.every((s) => s === 0)).toBe(true);
    // Received = applied + refused + what is still buffered (fewer than K).
    const buffered = result.received - result.staleness.length - result.refused.length;
    expect(buffered).toBeGreaterThanOrEqual(0);
    expect(buffered).toBeLessThan(2);
  });

  it('gives the same run every time and stops at the target', async () => {
    const a = await runFedBuff(options(), { train, evaluate: evaluations().evaluate });
    const b = await runFedBuff(options(), { train, evaluate: evaluations().evaluate });
    expect(b).toEqual(a);
    const stopped = await runFedBuff(options({ target: 0.25 }), {
      train,
      evaluate: evaluations().evaluate,
    });
    expect(stopped.steps).toBe(2);
    expect(timeToTarget(stopped.curve, 0.25)).toBe(stopped.curve[2]?.time);
    const none: TimedPoint[] = [{ round: 0, time: 0, accuracy: 0.1, loss: 0 }];
    expect(timeToTarget(none, 0.25)).toBeUndefined();
  });
});
