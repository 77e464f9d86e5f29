/**
 * bench/fl-learning's plan per condition: which learning rates it races (its grid, a rate fixed by
 * the environment, or the rate of the condition it borrows from) and where its run stops (the
 * target within its family's cap, at least the budget in the budget comparison, or the budget).
 */
import { describe, expect, it } from 'vitest';
import { rateGrids } from '../../../bench/fl-learning/conditions.js';
import { finalStop, ratesOf } from '../../../bench/fl-learning/execute.js';
import { parseSettings } from '../../../bench/fl-learning/settings.js';
import { readyCondition } from '../../../bench/fl-learning/setup.js';

const settings = parseSettings(
  { BENCH_ROUNDS_MAX: '900', BENCH_FL_FEDAVG_ROUNDS_MAX: '200', BENCH_FL_BUDGET: '40' },
  { workers: 0, out: '/tmp' },
);

describe('ratesOf', () => {
  it('races the family grid, or borrows the rate chosen for another condition', () => {
    expect(ratesOf(readyCondition('fedsgd-iid'), new Map(), {})).toEqual(rateGrids.fedsgd);
    const prox = readyCondition('fedprox-mu0.1-noniid');
    expect(ratesOf(prox, new Map([['fedavg-noniid', 0.07]]), {})).toEqual([0.07]);
    expect(ratesOf(prox, new Map(), {})).toEqual(rateGrids.fedavg);
  });

  it('takes a rate fixed for the family over everything else', () => {
    const prox = readyCondition('fedprox-mu0.1-noniid');
    expect(ratesOf(prox, new Map([['fedavg-noniid', 0.07]]), { fedavg: [0.3] })).toEqual([0.3]);
    expect(ratesOf(readyCondition('fedsgd-iid'), new Map(), { fedavg: [0.3] })).toEqual(
      rateGrids.fedsgd,
    );
  });
});

describe('finalStop', () => {
  it('caps each family and runs the budget comparisons baselines at least to the budget', () => {
    const target = 0.94;
    expect(finalStop(readyCondition('fedsgd-iid'), settings, target)).toMatchObject({
      maxRounds: 900,
      minRounds: 0,
      target,
    });
    expect(finalStop(readyCondition('fedavg-iid'), settings, target)).toMatchObject({
      maxRounds: 200,
      minRounds: 40,
    });
    expect(finalStop(readyCondition('fedavg-noniid'), settings, target)).toMatchObject({
      maxRounds: 200,
      minRounds: 40,
    });
    expect(finalStop(readyCondition('fedprox-mu0.1-noniid'), settings, target)).toMatchObject({
      maxRounds: 40,
      minRounds: 40,
    });
  });
});
