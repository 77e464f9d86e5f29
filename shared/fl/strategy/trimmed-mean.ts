/**
 * FedTrimmedAvg (Yin et al. 2018, "Byzantine-Robust Distributed Learning"), as Flower's
 * aggregate_trimmed_avg / _trim_mean (scipy's trim_mean): at every coordinate the values of the
 * n updates are sorted, int(beta * n) are cut from each end and the rest averaged, unweighted.
 * No update is rejected as a whole, so the report names none.
 */
import { ValidationError } from '../../errors/index.js';
import type { WeightUpdate } from '../fedavg.js';
import type { NamedTensors, Tensor } from '../weights.js';
import { alignAll, toTensors } from './tensors.js';

/** How many updates are cut from each end: Python's int(beta * n), as Flower's _trim_mean. */
function trimCount(beta: number, n: number): number {
  const cut = Math.floor(beta * n);
  if (2 * cut >= n) {
    throw new ValidationError(
      `fedtrimmedavg beta ${beta} cuts ${cut} of ${n} updates from each end: none would be left`,
    );
  }
  return cut;
}

/**
 * The coordinate-wise trimmed mean of `updates` (sum of the kept values in ascending order, in
 * float64). Refuses (ValidationError) what fedavg.ts refuses, and a beta that leaves nothing.
 */
function trimmedMean(
  base: NamedTensors,
  updates: readonly WeightUpdate[],
  beta: number,
): Map<string, Tensor> {
  const aligned = alignAll(base, updates);
  const n = aligned.length;
  const cut = trimCount(beta, n);
  const kept = n - 2 * cut;
  const column = new Float64Array(n);
  const means = [...base.values()].map((tensor, t) => {
    const out = new Float64Array(tensor.values.length);
    for (let i = 0; i < out.length; i += 1) {
      for (let k = 0; k < n; k += 1) column[k] = aligned[k]!.values[t]![i]!;
      column.sort();
      let sum = 0;
      for (let k = cut; k < n - cut; k += 1) sum += column[k]!;
      out[i] = sum / kept;
    }
    return out;
  });
  return toTensors(base, means);
}

export { trimmedMean, trimCount };
