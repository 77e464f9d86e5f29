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
  const ordered = inWorkerOrder(updates).map((u) => ({
    samples: u.samples,
    tensors: alignedValues(base, u),
  }));
  const total = ordered.reduce((sum, u) => sum + u.samples, 0);
  if (total <= 0) throw new ValidationError('the updates hold zero samples in total');
  const out = new Map<string, Tensor>();
  let t = 0;
  for (const [name, tensor] of base) {
    const sum = new Float64Array(tensor.values.length);
    for (const { samples, tensors } of ordered) {
      const values = tensors[t]!;
      for (let i = 0; i < sum.length; i += 1) sum[i]! += samples * values[i]!;
    }
    const mean = new Float32Array(sum.length);
    for (let i = 0; i < sum.length; i += 1) mean[i] = sum[i]! / total;
    out.set(name, { dims: [...tensor.dims], values: mean });
    t += 1;
  }
  return out;
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
