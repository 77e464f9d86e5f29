/**
 * bench/fl-learning's conditionDigests, what a run over HTTP is compared with: the sha256 of the
 * global weights after each round of a table condition, the same on every call for a seed.
 */
import { describe, expect, it } from 'vitest';
import {
  algorithmFor,
  conditionDigests,
  jobSelector,
  readyCondition,
} from '../../../bench/fl-learning/setup.js';
import { selectClients } from '../../../shared/fl/strategy/selection.js';

describe('conditionDigests', () => {
  it('gives one sha256 per round, the same on every call, another for another seed', async () => {
    const options = { learningRate: 0.6, seed: 1 };
    const a = await conditionDigests('fedsgd-iid', 2, options);
    expect(a).toHaveLength(2);
    expect(a.every((d) => /^[0-9a-f]{64}$/.test(d))).toBe(true);
    expect(a[0]).not.toBe(a[1]);
    expect(await conditionDigests('fedsgd-iid', 2, options)).toEqual(a);
    expect(await conditionDigests('fedsgd-iid', 1, { ...options, seed: 2 })).not.toEqual([a[0]]);
  });

  it('refuses an id that is not a ready condition, naming the ready ones', () => {
    expect(() => readyCondition('fedbuff')).toThrow(/not a ready condition.*fedsgd-iid/);
    expect(() => readyCondition('nope')).toThrow(/nope/);
  });
});

describe('jobSelector', () => {
  it('selects what fl-aggregator selects: selectClients with the job fraction, minimum 1 and seed', () => {
    const names = Array.from({ length: 100 }, (_, i) => `client-${i}`);
    for (const round of [1, 2, 37]) {
      expect(jobSelector(0.1, 1)(names, round)).toEqual(
        selectClients({ available: names, fraction: 0.1, minimum: 1, seed: 1, round }),
      );
    }
    expect(jobSelector(0.1, 1)(names, 1)).toHaveLength(10);
  });
});

describe('algorithmFor', () => {
  it('takes a server eta only for a server optimizer, and poisons only poisoned conditions', () => {
    const adam = algorithmFor(readyCondition('fedadam-noniid'), 0.2, 1, { serverRate: 0.01 });
    expect(adam.local).toMatchObject({ epochs: 5, batchSize: 10, learningRate: 0.2, seed: 1 });
    expect(() => algorithmFor(readyCondition('fedavg-iid'), 0.2, 1, { serverRate: 0.01 })).toThrow(
      /fedavg has no server learning rate/,
    );
    expect(algorithmFor(readyCondition('fedavg-iid'), 0.2, 1).corrupt).toBeUndefined();
    expect(algorithmFor(readyCondition('krum-poisoned'), 0.2, 1).corrupt).toBeTypeOf('function');
  });
});
