/**
 * bench/fl-learning's JSON figures: rounds to the target per condition, the speed-ups against
 * their targets (exact, or a lower bound when FedSGD hit its cap), the non-IID budget comparison in
 * points, and no figure for conditions that did not run.
 */
import { describe, expect, it } from 'vitest';
import { readyCondition } from '../../../bench/fl-learning/setup.js';
import type { ConditionResult } from '../../../bench/fl-learning/execute.js';
import type { Reach } from '../../../bench/fl-learning/curves.js';
import { fedbuffFigures, figuresOf } from '../../../bench/fl-learning/figures.js';

function result(id: string, reach: Reach, atBudget?: number): [string, ConditionResult] {
  return [
    id,
    {
      condition: readyCondition(id),
      rate: 0.1,
      serverRate: undefined,
      trials: [],
      raceRounds: 0,
      curve: [],
      rounds: reach.rounds,
      divergedAt: undefined,
      reach,
      atBudget,
      ms: 1,
    },
  ];
}

describe('figuresOf', () => {
  it('gives the rounds to the target, the speed-ups and the budget comparison', () => {
    const results = new Map([
      result('fedsgd-iid', { kind: 'reached', rounds: 300 }),
      result('fedavg-iid', { kind: 'reached', rounds: 20 }),
      result('fedsgd-noniid', { kind: 'not-reached', rounds: 1000, best: 0.9 }),
      result('fedavg-noniid', { kind: 'reached', rounds: 250 }, 0.9),
      result('fedprox-mu0.01-noniid', { kind: 'not-reached', rounds: 50, best: 0.93 }, 0.925),
      result('fedprox-mu0.1-noniid', { kind: 'not-reached', rounds: 50, best: 0.93 }, 0.91),
    ]);
    const { figures, targets, notes } = figuresOf(results, 0.96, 0.94, 50);
    expect(figures).toMatchObject({
      central_test_accuracy: 0.96,
      target_accuracy: 0.94,
      rounds_to_target_fedsgd_iid: 300,
      reached_target_fedsgd_noniid: 0,
      rounds_to_target_fedavg_noniid: 250,
      fedavg_round_speedup_iid: 15,
      fedavg_round_speedup_noniid: 4,
      accuracy_at_budget_fedprox_mu0_01_noniid: 0.925,
      accuracy_at_budget_fedprox_mu0_1_noniid: 0.91,
    });
    expect(figures['fl_noniid_best_minus_fedavg']).toBeCloseTo(2.5, 9);
    expect(figures).not.toHaveProperty('rounds_to_target_fedprox_mu0_01_noniid');
    expect(targets['fedavg_round_speedup_iid']).toEqual({ value: 15, op: '>=', target: 10 });
    expect(targets['fedavg_round_speedup_noniid']).toEqual({ value: 4, op: '>=', target: 2 });
    expect(notes.join('\n')).toMatch(/fedavg_round_speedup_noniid = 4.00: lower bound/);
  });

  it('gives the best robust aggregator against clean FedAvg, in points, against -2', () => {
    const results = new Map([
      result('fedavg-iid', { kind: 'reached', rounds: 25 }, 0.95),
      result('fedavg-poisoned', { kind: 'not-reached', rounds: 50, best: 0.3 }, 0.1),
      result('trimmed-poisoned', { kind: 'not-reached', rounds: 50, best: 0.9 }, 0.9),
      result('krum-poisoned', { kind: 'not-reached', rounds: 50, best: 0.92 }, 0.92),
    ]);
    const { figures, targets, notes } = figuresOf(results, 0.96, 0.94, 50);
    expect(figures['fl_poisoned_robust_minus_clean']).toBeCloseTo(-3, 9);
    expect(figures['accuracy_at_budget_fedavg_poisoned']).toBe(0.1);
    expect(targets['fl_poisoned_robust_minus_clean']).toMatchObject({ op: '>=', target: -2 });
    expect(notes.join('\n')).toMatch(/krum-poisoned against unpoisoned fedavg-iid/);
  });

  it("gives FedBuff's time speed-up, a lower bound when only FedBuff reached the target", () => {
    const summary = { steps: 40, refused: 1, received: 205, meanStaleness: 1.5 };
    const both = fedbuffFigures({ ...summary, syncTime: 300, asyncTime: 100 }, 900);
    expect(both.figures['fedbuff_time_speedup']).toBe(3);
    expect(both.targets['fedbuff_time_speedup']).toEqual({ value: 3, op: '>=', target: 2 });
    const bound = fedbuffFigures({ ...summary, syncTime: undefined, asyncTime: 100 }, 900);
    expect(bound.figures['fedbuff_time_speedup']).toBe(9);
    expect(bound.note).toMatch(/lower bound/);
    const missed = fedbuffFigures({ ...summary, syncTime: 300, asyncTime: undefined }, 900);
    expect(missed.figures['fedbuff_time_speedup']).toBe(0);
    expect(missed.note).toMatch(/FedBuff did not reach/);
  });

  it('leaves out the figures of conditions that did not run', () => {
    const { figures, targets } = figuresOf(
      new Map([result('fedsgd-iid', { kind: 'reached', rounds: 30 })]),
      0.96,
      0.94,
      50,
    );
    expect(figures).not.toHaveProperty('fedavg_round_speedup_iid');
    expect(figures).not.toHaveProperty('fl_noniid_best_minus_fedavg');
    expect(figures).not.toHaveProperty('fl_poisoned_robust_minus_clean');
    expect(targets).toEqual({});
  });
});
