/** The greedy hindsight oracle, checked against brute force on a short full-edge run. */
import { describe, expect, it } from 'vitest';
import { runControlled, staticController } from '../../../shared/aset/episode.js';
import type { ControlledRun, WindowController } from '../../../shared/aset/episode.js';
import { bestStaticInHindsight, runGreedyOracle } from '../../../shared/aset/oracle.js';
import { loadScenario } from '../../../shared/aset/scenario.js';
import { createSimulation } from '../../../shared/aset/simulator.js';
import type { SimulationOptions } from '../../../shared/aset/simulator.js';
import { policyNames } from '../../../shared/aset/types.js';
import type { PolicyName } from '../../../shared/aset/types.js';
import { constantLambda } from '../../../shared/aset/workload.js';

const dataDir = new URL('../../../data/aset/', import.meta.url);

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
    // Replays of 0 + 1 + 2 + 3 + 4 windows for 6 candidates (the leader saves one) plus 7 trials
    // per window.
    expect(oracle.simulatedMs).toBe(6 * 4000 * (0 + 1 + 2 + 3 + 4) + 7 * 20_000);
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
