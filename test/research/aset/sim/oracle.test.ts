/** The greedy hindsight oracle, checked against brute force on a short full-edge run. */
import { describe, expect, it } from 'vitest';
import { runControlled, staticController } from '../../../../research/aset/sim/episode.js';
import type { ControlledRun } from '../../../../research/aset/sim/episode.js';
import type { WindowController } from '../../../../shared/aset/window.js';
import {
  bestStaticInHindsight,
  deviationTrials,
  runGreedyOracle,
} from '../../../../research/aset/sim/oracle.js';
import { loadScenario } from '../../../../shared/aset/scenario.js';
import { createSimulation } from '../../../../research/aset/sim/simulator.js';
import { encodeState } from '../../../../shared/aset/state.js';
import type { SimulationOptions } from '../../../../research/aset/sim/simulator.js';
import { policyNames } from '../../../../shared/aset/types.js';
import type { PolicyName } from '../../../../shared/aset/types.js';
import { constantLambda } from '../../../../research/aset/sim/workload.js';

const dataDir = new URL('../../../../data/aset/', import.meta.url);

/** Plays back a fixed policy sequence, one per window. */
function scripted(policies: readonly PolicyName[]): WindowController {
  let k = 0;
  return { name: 'scripted', choose: () => policies[k++]! };
}

describe('runGreedyOracle on full-edge', async () => {
  const { apps, topology } = await loadScenario(dataDir, 'full-edge');
  // A heavy load, so the edge fills up within seconds and the policies part ways early.
  const options: SimulationOptions = { topology, apps, lambda: constantLambda(100), seed: 5 };
  const spec = { durationMs: 20_000, windowMs: 4_000, warmupMs: 4_000 };
  const oracle = runGreedyOracle(options, spec);

  it('picks, in every window, the policy a brute-force search finds best for that window', () => {
    const ends = [4000, 8000, 12_000, 16_000, 20_000];
    let spread = 0;
    oracle.windows.forEach((window, k) => {
      // From scratch: the oracle's own prefix, then each of the seven for window k.
      const scores = policyNames.map((candidate) => {
        const sim = createSimulation(options);
        for (let i = 0; i < k; i += 1) {
          sim.setPolicy(oracle.windows[i]!.policy);
          sim.runUntil(ends[i]!);
          sim.takeWindow();
        }
        sim.setPolicy(candidate);
        sim.runUntil(ends[k]!);
        return sim.takeWindow().success;
      });
      const best = Math.max(...scores);
      // Ties go to the first in policyNames order.
      expect(window.policy).toBe(policyNames[scores.indexOf(best)]);
      expect(window.success).toBe(best);
      expect(policyNames.map((p) => window.trialSuccess[p])).toEqual(scores);
      spread = Math.max(spread, best - Math.min(...scores));
    });
    // Not a vacuous check: the choice mattered in at least one window.
    expect(spread).toBeGreaterThan(0);
  });

  it('reports the outcomes a plain run of its policy sequence has', async () => {
    const replayed = await runControlled(
      options,
      scripted(oracle.windows.map((w) => w.policy)),
      spec,
    );
    expect(oracle.windows.map(({ trialSuccess: _t, ...w }) => w)).toEqual(replayed.windows);
    expect(oracle.counted).toEqual(replayed.counted);
    expect(oracle.policyShare).toEqual(replayed.policyShare);
    // 7 one-window trials per window, each on a fork: no replays of the prefix.
    expect(oracle.simulatedMs).toBe(7 * 20_000);
  });

  it('is deterministic', () => {
    expect(runGreedyOracle(options, spec)).toEqual(oracle);
  });

  it('with one candidate is that static policy; lookahead scores over more windows', async () => {
    const only = runGreedyOracle(options, spec, { candidates: ['farthest'] });
    const fixed = await runControlled(options, staticController('farthest'), spec);
    expect(only.windows.map(({ trialSuccess: _t, ...w }) => w)).toEqual(fixed.windows);
    const ahead = runGreedyOracle(options, spec, { lookaheadWindows: 1 });
    // The first window's trials now also count the second window, under the same policy.
    const twoWindows = (p: PolicyName) => {
      const sim = createSimulation({ ...options, policy: p });
      sim.runUntil(8000);
      return sim.totals().success;
    };
    expect(ahead.windows[0]!.trialSuccess.cheaper).toBe(twoWindows('cheaper'));
    expect(() => runGreedyOracle(options, spec, { lookaheadWindows: -1 })).toThrow(RangeError);
    expect(() => runGreedyOracle(options, spec, { candidates: [] })).toThrow(RangeError);
  });
});

describe('deviationTrials on full-edge', async () => {
  const { apps, topology } = await loadScenario(dataDir, 'full-edge');
  const options: SimulationOptions = { topology, apps, lambda: constantLambda(100), seed: 5 };
  const spec = {
    base: 'farthest' as const,
    decisions: [2, 3],
    horizonWindows: 2,
    windowMs: 4_000,
    candidates: ['farthest', 'load-balancing', 'closest'] as const,
  };
  const trials = deviationTrials(options, spec);

  /** Brute force: `candidate` in window k of a farthest run, outcomes of windows k and k + 1. */
  const bruteForce = (k: number, candidate: PolicyName) => {
    const sim = createSimulation(options);
    sim.setPolicy('farthest');
    let before;
    for (let i = 0; i < k; i += 1) {
      sim.runUntil((i + 1) * 4_000);
      before = sim.takeWindow();
    }
    let success = 0;
    let counted = 0;
    for (let i = k; i < k + 2; i += 1) {
      sim.setPolicy(i === k ? candidate : 'farthest');
      sim.runUntil((i + 1) * 4_000);
      const w = sim.takeWindow();
      success += w.success;
      counted += w.success + w.qosFailure + w.rejected;
    }
    return { state: encodeState(topology, before), success, counted };
  };

  it("scores each candidate's one-window deviation from the base path, in the state before it", () => {
    expect(trials.map((t) => t.window)).toEqual([2, 3]);
    let spread = 0;
    for (const trial of trials) {
      for (const candidate of spec.candidates) {
        const expected = bruteForce(trial.window, candidate);
        expect(trial.success[candidate]).toBe(expected.success);
        expect(trial.counted[candidate]).toBe(expected.counted);
        expect(trial.state).toEqual(expected.state);
      }
      const scores = spec.candidates.map((c) => trial.success[c]!);
      spread = Math.max(spread, Math.max(...scores) - Math.min(...scores));
    }
    // The deviations made a difference somewhere, so the equalities above are not all trivial.
    expect(spread).toBeGreaterThan(0);
    expect(trials[0]!.state.some((v) => v > 0)).toBe(true);
  });

  it('the base candidate is the plain base run', () => {
    const sim = createSimulation({ ...options, policy: 'farthest' });
    sim.runUntil(2 * 4_000);
    const before = sim.totals().success;
    sim.runUntil(4 * 4_000);
    expect(trials[0]!.success.farthest).toBe(sim.totals().success - before);
  });

  it('decides at window 0 from the empty system, with the empty state', () => {
    const [first] = deviationTrials(options, { ...spec, decisions: [0] });
    expect(first!.state).toEqual(encodeState(topology, undefined));
    expect(first!.state.every((v) => v === 0)).toBe(true);
    for (const candidate of spec.candidates) {
      expect(first!.success[candidate]).toBe(bruteForce(0, candidate).success);
    }
  });

  it('refuses a negative decision, a horizon below one window, no candidates', () => {
    expect(() => deviationTrials(options, { ...spec, decisions: [-1] })).toThrow(RangeError);
    expect(() => deviationTrials(options, { ...spec, horizonWindows: 0 })).toThrow(RangeError);
    expect(() => deviationTrials(options, { ...spec, candidates: [] })).toThrow(RangeError);
  });
});

describe('bestStaticInHindsight', () => {
  const run = (success: number): ControlledRun => ({
    windows: [],
    counted: { success, qosFailure: 0, rejected: 0 },
    policyShare: Object.fromEntries(policyNames.map((p) => [p, 0])) as Record<PolicyName, number>,
  });

  it('takes the most successes, the earlier policy on a tie', () => {
    expect(bestStaticInHindsight({ closest: run(5), farthest: run(9), cheaper: run(9) })).toEqual({
      policy: 'farthest',
      counted: { success: 9, qosFailure: 0, rejected: 0 },
    });
    expect(() => bestStaticInHindsight({})).toThrow(RangeError);
  });
});
