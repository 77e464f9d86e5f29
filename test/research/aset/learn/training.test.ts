/** ASET training (Algorithm 1) on the dc-cloud scenario: reward, cut at theta, determinism. */
import { beforeAll, describe, expect, it } from 'vitest';
import { loadScenario } from '../../../../shared/aset/scenario.js';
import type { Scenario } from '../../../../shared/aset/scenario.js';
import type { SimulationWindow } from '../../../../shared/aset/window.js';
import {
  reward,
  scoreGreedy,
  scoreRuns,
  trainAset,
} from '../../../../research/aset/learn/training.js';
import { policyNames } from '../../../../shared/aset/types.js';
import type { TrainingOptions } from '../../../../research/aset/learn/training.js';

const dataDir = new URL('../../../../data/aset/', import.meta.url);

const outcome = (success: number, qosFailure: number, rejected: number): SimulationWindow => ({
  startMs: 0,
  endMs: 25_000,
  policy: 'farthest',
  success,
  qosFailure,
  rejected,
  samples: [],
});

describe('ASET training', () => {
  let scenario: Scenario;
  beforeAll(async () => {
    scenario = await loadScenario(dataDir, 'dc-cloud');
  });
  const small = (over: Partial<TrainingOptions> = {}): TrainingOptions => ({
    scenario,
    episodes: 3,
    trainingSeeds: 5,
    seed: 7,
    horizonMs: 75_000,
    warmupMs: 25_000,
    // No cuts unless a test asks (dc-cloud's success ratio is low: Table I's tight deadlines).
    theta: 0,
    dqn: { batchSize: 4, minReplay: 4, gradientSteps: 3, hidden: [8] },
    ...over,
  });

  it('rewards per lines 9-10: -(qF + qR) below phi, psi at or above it', () => {
    expect(reward(outcome(60, 30, 10), 1, 0.5)).toBeCloseTo(-0.4, 12);
    // Success exactly at phi = 0.6 is not below it: psi.
    expect(reward(outcome(60, 30, 10), 0.6, 0.5)).toBe(0.5);
    expect(reward(outcome(59, 31, 10), 0.6, 0.5)).toBeCloseTo(-0.41, 12);
    // An empty window is no failure.
    expect(reward(outcome(0, 0, 0), 1, 0)).toBe(0);
  });

  it('plays H / T windows per episode and is deterministic for a seed', () => {
    const a = trainAset(small());
    const b = trainAset(small());
    expect(a.episodes.map((e) => e.windows)).toEqual([3, 3, 3]);
    expect(a.episodes.every((e) => !e.cut)).toBe(true);
    expect(b.episodes).toEqual(a.episodes);
    expect(Array.from(b.agent.network.params[0]!.value)).toEqual(
      Array.from(a.agent.network.params[0]!.value),
    );
    const other = trainAset(small({ seed: 8 }));
    expect(Array.from(other.agent.network.params[0]!.value)).not.toEqual(
      Array.from(a.agent.network.params[0]!.value),
    );
    // Episodes after the first have enough transitions to learn from.
    expect(a.episodes[2]!.gradientSteps).toBe(3);
  });

  it('cuts an episode when success falls to theta, charging every window left as failed', () => {
    const { episodes, agent } = trainAset(small({ theta: 1, episodes: 1 }));
    const [only] = episodes;
    expect(only).toMatchObject({ windows: 1, cut: true });
    // One window played: its reward (<= 0 with phi = 1) minus the two windows left.
    expect(only!.return).toBeLessThanOrEqual(-2);
    expect(only!.return).toBeGreaterThanOrEqual(-3);
    expect(agent.replay.size).toBe(1);
    expect(agent.replay.terminal(0)).toBe(true);
  });

  it('keeps the network that scored best on the validation seeds, scored as the bench does', () => {
    const validation = { seeds: [51], everyEpisodes: 2, durationMs: 75_000, warmupMs: 25_000 };
    const seen: number[] = [];
    const run = trainAset(
      small({ episodes: 5, validation, onValidation: (v) => seen.push(v.episodes) }),
    );
    // After episodes 2 and 4, and after the last.
    expect(run.validations.map((v) => v.episodes)).toEqual([2, 4, 5]);
    expect(seen).toEqual([2, 4, 5]);
    const rescore = scoreGreedy(run.network, scenario, validation.seeds, {
      lambda: 60,
      windowMs: 25_000,
      durationMs: validation.durationMs,
      warmupMs: validation.warmupMs,
    });
    const best = Math.max(...run.validations.map((v) => v.success));
    expect(rescore).toBe(best);
    const first = run.validations.findIndex((v) => v.success === best);
    // A later network is returned only if it scored strictly better than every earlier one.
    expect(run.validations.slice(0, first).every((v) => v.success < best)).toBe(true);
    // The selected network is a copy: training on did not change it after its validation.
    if (first < run.validations.length - 1) {
      expect(run.network).not.toBe(run.agent.network);
    }
    // Deterministic, validation included.
    expect(trainAset(small({ episodes: 5, validation })).validations).toEqual(run.validations);
  });

  it('deploys whichever scored best on the validation runs: the network or a static policy', () => {
    const validation = { seeds: [51], everyEpisodes: 2, durationMs: 75_000, warmupMs: 25_000 };
    const run = trainAset(small({ episodes: 3, validation }));
    const protocol = { lambda: 60, windowMs: 25_000, durationMs: 75_000, warmupMs: 25_000 };
    // Each static policy played the same runs the networks did, scored the same way.
    expect(run.staticValidations.map((v) => v.policy)).toEqual([...policyNames]);
    for (const { policy, success } of run.staticValidations) {
      expect(success).toBe(scoreRuns(() => policy, scenario, validation.seeds, protocol));
    }
    const candidates = [run.selected!.success, ...run.staticValidations.map((v) => v.success)];
    expect(run.deployed!.success).toBe(Math.max(...candidates));
    const bestStatic = Math.max(...run.staticValidations.map((v) => v.success));
    if (bestStatic > run.selected!.success) {
      expect(run.deployed).toEqual({
        kind: 'static',
        policy: run.staticValidations.find((v) => v.success === bestStatic)!.policy,
        success: bestStatic,
      });
    } else {
      expect(run.deployed).toEqual({ kind: 'network', ...run.selected });
    }
    // Without validation there is nothing to choose between.
    expect(trainAset(small({ episodes: 1 })).deployed).toBeUndefined();
  });

  it('refuses validation seeds that are training seeds', () => {
    expect(() => trainAset(small({ validation: { seeds: [3], everyEpisodes: 1 } }))).toThrow(
      /validation seeds must not be training seeds 1..5/,
    );
  });
});
