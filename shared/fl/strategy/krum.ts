/**
 * Krum and MultiKrum (Blanchard et al. 2017, "Machine Learning with Adversaries: Byzantine
 * Tolerant Gradient Descent"), as Flower's aggregate_krum: an update's score is the sum of its
 * squared L2 distances to its max(1, n - f - 2) nearest other updates; Krum keeps the update of
 * lowest score, MultiKrum (m > 1) the sample-weighted mean (fedAvg) of the m lowest. Flower
 * writes Krum as num_clients_to_keep = 0; here it is m = 1 (the same result). Distances are
 * float64 and ties go to the earlier worker name, so the choice does not depend on arrival order.
 */
import { ValidationError } from '../../errors/index.js';
import { fedAvg } from '../fedavg.js';
import type { WeightUpdate } from '../fedavg.js';
import type { NamedTensors, Tensor } from '../weights.js';
import { alignAll, toTensors } from './tensors.js';
import type { AlignedUpdate } from './tensors.js';
import type { Verdict } from './types.js';

function squaredDistance(a: AlignedUpdate, b: AlignedUpdate): number {
  let sum = 0;
  a.values.forEach((values, t) => {
    const other = b.values[t]!;
    for (let i = 0; i < values.length; i += 1) {
      const d = values[i]! - other[i]!;
      sum += d * d;
    }
  });
  return sum;
}

/** Every update's Krum score, in `aligned`'s order. */
function krumScores(aligned: readonly AlignedUpdate[], f: number): number[] {
  const n = aligned.length;
  const closest = Math.max(1, n - f - 2);
  const distances = aligned.map(() => new Float64Array(n));
  for (let i = 0; i < n; i += 1) {
    for (let j = i + 1; j < n; j += 1) {
      const d = squaredDistance(aligned[i]!, aligned[j]!);
      distances[i]![j] = d;
      distances[j]![i] = d;
    }
  }
  return distances.map((row, i) => {
    const others = row.filter((_, j) => j !== i).sort();
    let score = 0;
    for (let k = 0; k < Math.min(closest, others.length); k += 1) score += others[k]!;
    return score;
  });
}

interface KrumResult {
  readonly weights: Map<string, Tensor>;
  /** The kept updates' workers, lowest score first. */
  readonly selected: readonly string[];
  /** The others, in worker order. */
  readonly rejected: readonly Verdict[];
}

/**
 * Krum (m = 1) or MultiKrum (m > 1) over `updates` assuming at most `f` Byzantine ones. Refuses
 * (ValidationError) what fedavg.ts refuses, f not an integer >= 0, m not an integer in [1, n].
 */
function krum(
  base: NamedTensors,
  updates: readonly WeightUpdate[],
  f: number,
  m: number,
): KrumResult {
  const aligned = alignAll(base, updates);
  const n = aligned.length;
  if (!Number.isSafeInteger(f) || f < 0) {
    throw new ValidationError(`krum f ${f} is not an integer >= 0`);
  }
  if (!Number.isSafeInteger(m) || m < 1 || m > n) {
    throw new ValidationError(`krum m ${m} is not an integer in [1, ${n}] (the round's updates)`);
  }
  const scores = krumScores(aligned, f);
  const order = aligned.map((_, i) => i).sort((a, b) => scores[a]! - scores[b]! || a - b);
  const kept = new Set(order.slice(0, m));
  const selected = order.slice(0, m).map((i) => aligned[i]!.worker);
  const rejected = aligned
    .filter((_, i) => !kept.has(i))
    .map((u) => ({
      worker: u.worker,
      reason: `not among the ${m} lowest Krum scores (f = ${f})`,
    }));
  const weights =
    m === 1
      ? toTensors(base, aligned[order[0]!]!.values)
      : fedAvg(
          base,
          updates.filter((u) => selected.includes(u.worker)),
        );
  return { weights, selected, rejected };
}

export { krum, krumScores };
export type { KrumResult };
