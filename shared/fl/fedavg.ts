/**
 * Federated averaging (McMahan et al. 2017, "Communication-Efficient Learning of Deep Networks
 * from Decentralized Data"): the next global model is the mean of the trainers' weights, each
 * weighted by how many samples it trained on. Sums run in float64 in the order of the workers'
 * names, so the same set of updates gives the same bytes whatever order they arrived in.
 */
import { ValidationError } from '../errors/index.js';
import type { NamedTensors, Tensor } from './weights.js';
import { checkFinite } from './weights.js';

/** One trainer's result for a round: its weights and the number of samples behind them. */
interface WeightUpdate {
  /** Who trained (unique in a round): also the summation order. */
  readonly worker: string;
  /** Samples trained on: the update's weight in the mean. */
  readonly samples: number;
  readonly weights: NamedTensors;
}

const sameDims = (a: readonly number[], b: readonly number[]) =>
  a.length === b.length && a.every((d, i) => d === b[i]);

/**
 * `update`'s tensors' values in `base`'s order; throws unless it carries exactly `base`'s tensor
 * names, each with `base`'s dims and (when `finite`) finite values.
 */
function alignedValues(base: NamedTensors, update: WeightUpdate, finite = true): Float32Array[] {
  const { worker, samples, weights } = update;
  if (!Number.isSafeInteger(samples) || samples < 0) {
    throw new ValidationError(`worker ${worker}: samples ${samples} is not an integer >= 0`);
  }
  const aligned: Float32Array[] = [];
  for (const [name, expected] of base) {
    const got = weights.get(name);
    if (got === undefined) throw new ValidationError(`worker ${worker}: tensor ${name} is missing`);
    if (!sameDims(got.dims, expected.dims) || got.values.length !== expected.values.length) {
      throw new ValidationError(
        `worker ${worker}: tensor ${name} has dims ${JSON.stringify(got.dims)} (${got.values.length} values), the model has ${JSON.stringify(expected.dims)}`,
      );
    }
    if (finite) checkFinite(`${name} of worker ${worker}`, got.values);
    aligned.push(got.values);
  }
  for (const name of weights.keys()) {
    if (!base.has(name)) {
      throw new ValidationError(`worker ${worker}: tensor ${name} is not in the model`);
    }
  }
  return aligned;
}

/** The updates in summation order (by worker name, code-unit order), refusing a repeated worker. */
function inWorkerOrder(updates: readonly WeightUpdate[]): WeightUpdate[] {
  const sorted = [...updates].sort((a, b) =>
    a.worker < b.worker ? -1 : a.worker > b.worker ? 1 : 0,
  );
  sorted.forEach((update, i) => {
    if (i > 0 && sorted[i - 1]!.worker === update.worker) {
      throw new ValidationError(`worker ${update.worker} sent two updates`);
    }
  });
  return sorted;
}

/**
 * The sample-weighted mean of `updates`, tensor by tensor over `base`'s names (and in its order,
 * with its dims): sum(samples_k * w_k) / sum(samples_k), accumulated in float64. Refuses
 * (ValidationError) no updates, a repeated worker, an update whose names or dims differ from
 * `base`, a non-finite value and a total of zero samples.
 */
function fedAvg(base: NamedTensors, updates: readonly WeightUpdate[]): Map<string, Tensor> {
  if (updates.length === 0) throw new ValidationError('no updates to average');
  // Names and dims now; finiteness as the sums are made (a non-finite value makes its sum so).
  const ordered = inWorkerOrder(updates).map((u) => ({
    worker: u.worker,
    samples: u.samples,
    tensors: alignedValues(base, u, false),
  }));
  const total = ordered.reduce((sum, u) => sum + u.samples, 0);
  if (total <= 0) throw new ValidationError('the updates hold zero samples in total');
  const out = new Map<string, Tensor>();
  let t = 0;
  for (const [name, tensor] of base) {
    const mean = new Float32Array(tensor.values.length);
    const terms = ordered.map((u) => ({ samples: u.samples, values: u.tensors[t]! }));
    if (!weightedMean(terms, total, mean)) {
      for (const u of ordered) checkFinite(`${name} of worker ${u.worker}`, u.tensors[t]!);
    }
    out.set(name, { dims: [...tensor.dims], values: mean });
    t += 1;
  }
  return out;
}

/** Elements summed per block: the block's float64 sums stay in the CPU's first-level cache. */
const block = 2048;

/**
 * `mean[i] = sum_k(samples_k * values_k[i]) / total`, each sum in float64 in the updates' order,
 * block by block (the same additions in the same order as a plain loop, so the same bits).
 * False when a sum is not finite: a value was not (float32 values times sample counts cannot
 * overflow a float64).
 */
function weightedMean(
  terms: ReadonlyArray<{ samples: number; values: Float32Array }>,
  total: number,
  mean: Float32Array,
): boolean {
  const sum = new Float64Array(Math.min(block, mean.length));
  let check = 0;
  for (let start = 0; start < mean.length; start += block) {
    const n = Math.min(block, mean.length - start);
    sum.fill(0);
    for (const { samples, values } of terms) {
      for (let i = 0; i < n; i += 1) sum[i]! += samples * values[start + i]!;
    }
    for (let i = 0; i < n; i += 1) {
      check += sum[i]! * 0;
      mean[start + i] = sum[i]! / total;
    }
  }
  // x * 0 is 0 for every finite x and NaN for an infinite or NaN one.
  return check === 0;
}

/**
 * Throws (ValidationError, naming the worker and tensor) unless `update` has `base`'s names and
 * dims. Its values' finiteness is decodeWeights's check (it has run on every received update).
 */
function checkUpdate(base: NamedTensors, update: WeightUpdate): void {
  alignedValues(base, update, false);
}

export { fedAvg, checkUpdate, alignedValues, inWorkerOrder };
export type { WeightUpdate };
