import { describe, expect, it } from 'vitest';
import { conditionsOf, settingsFrom } from '../../../research/bench/aset-sim/conditions.js';
import { headline } from '../../../research/bench/aset-sim/figures.js';
import type { ConditionSummary } from '../../../research/bench/aset-sim/tables.js';

const root = new URL('../../../', import.meta.url);

describe('aset-sim plan (issue 20, final table)', () => {
  it('defaults to the final seeds 201-220 and validation seeds 51-56', () => {
    const settings = settingsFrom([], root);
    expect(settings.seeds).toEqual(Array.from({ length: 20 }, (_, i) => 201 + i));
    expect(settings.validationSeeds).toEqual([51, 52, 53, 54, 55, 56]);
    expect(settingsFrom(['--seeds', '2'], root).seeds).toEqual([201, 202]);
    expect(settingsFrom(['--seeds', '2', '--first-seed', '51'], root).seeds).toEqual([51, 52]);
  });

  it('runs lambda 60 on three topologies, the sweep on two and both patterns on full-edge', () => {
    const conditions = conditionsOf(settingsFrom([], root));
    expect(conditions.map((c) => c.id)).toEqual([
      'dc-cloud-lambda-60',
      ...[20, 40, 60, 80, 100].map((l) => `co-dc-cloud-lambda-${l}`),
      ...[20, 40, 60, 80, 100].map((l) => `full-edge-lambda-${l}`),
      'full-edge-burst',
      'full-edge-falling',
    ]);
    const byId = new Map(conditions.map((c) => [c.id, c]));
    expect(byId.get('full-edge-lambda-20')).toMatchObject({ durationMs: 600_000, oracles: false });
    expect(byId.get('full-edge-lambda-60')).toMatchObject({ oracles: true, sweep: true });
    expect(byId.get('dc-cloud-lambda-60')).toMatchObject({ oracles: true, sweep: false });
    expect(byId.get('full-edge-burst')).toMatchObject({ durationMs: 1_050_000, oracles: true });
  });
});

describe('aset-sim headline', () => {
  const gap = (mean: number, halfWidth: number) => ({ mean, halfWidth });
  const summaries = (burstOracle: number, aset: boolean): ConditionSummary[] =>
    conditionsOf(settingsFrom([], root)).map((condition) => ({
      condition,
      best: 'farthest',
      bestSuccess: 80,
      threshold: gap(-1, 0.5),
      cycle: gap(0.1, 0.2),
      oracles: new Map(
        condition.oracles
          ? [
              [0, gap(0.5, 0.4)],
              [4, gap(burstOracle, 0.5)],
            ]
          : [],
      ),
      ...(aset ? { aset: gap(1.2, 0.4), asetMinusThreshold: gap(2.2, 0.6) } : {}),
    }));

  it('applies the margin targets only when the lookahead oracle finds room on the burst', () => {
    const roomy = headline(summaries(2, true), 500);
    expect(roomy.figures.full_edge_burst_gap_closed).toBeCloseTo(0.6);
    expect(roomy.figures.aset_minus_threshold_rule_full_edge_burst).toBeCloseTo(2.2);
    expect(Object.keys(roomy.targets)).toContain('full_edge_burst_gap_closed');
    const tight = headline(summaries(1, true), 500);
    expect(Object.keys(tight.targets)).toEqual(['speed_x_realtime']);
    expect(tight.notes.join('\n')).toMatch(/do not apply/);
  });

  it('keeps only the speed target without ASET', () => {
    const staticOnly = headline(summaries(2, false), 50);
    expect(Object.keys(staticOnly.targets)).toEqual(['speed_x_realtime']);
    expect(staticOnly.figures.full_edge_burst_aset_minus_best_static).toBeUndefined();
  });
});
