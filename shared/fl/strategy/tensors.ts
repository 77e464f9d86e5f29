/**
 * The strategies' common ground: a round's updates checked against the model and put in
 * summation order once (fedavg.ts's checks), float64 deltas from the model, and the way back to
 * float32 tensors in the model's names, order and dims.
 */
import { ValidationError } from '../../errors/index.js';
import { alignedValues, inWorkerOrder } from '../fedavg.js';
import type { WeightUpdate } from '../fedavg.js';
import type { NamedTensors, Tensor } from '../weights.js';
import { checkFinite } from '../weights.js';

/** One update, checked: its tensors' values in the model's order. */
interface AlignedUpdate {
  readonly worker: string;
  readonly samples: number;
  readonly values: readonly Float32Array[];
}

/**
 * `updates` in worker-name order, each with its values in `base`'s order. Refuses
 * (ValidationError) no updates, a repeated worker, a misfit tensor and a non-finite value.
 */
function alignAll(base: NamedTensors, updates: readonly WeightUpdate[]): AlignedUpdate[] {
  if (updates.length === 0) throw new ValidationError('no updates to aggregate');
  return inWorkerOrder(updates).map((u) => ({
    worker: u.worker,
    samples: u.samples,
    values: alignedValues(base, u),
  }));
}

/** The model's values, tensor by tensor, in its order. */
function modelValues(base: NamedTensors): Float32Array[] {
  return [...base.values()].map((t) => t.values);
}

/** `values - from`, element by element, in float64. */
function deltaOf(values: readonly Float32Array[], from: readonly Float32Array[]): Float64Array[] {
  return values.map((v, t) => {
    const f = from[t]!;
    const out = new Float64Array(v.length);
    for (let i = 0; i < v.length; i += 1) out[i] = v[i]! - f[i]!;
    return out;
  });
}

/** Sum of squares over every tensor (the squared L2 norm of the flattened vector). */
function squaredNorm(parts: readonly ArrayLike<number>[]): number {
  let sum = 0;
  for (const part of parts) for (let i = 0; i < part.length; i += 1) sum += part[i]! * part[i]!;
  return sum;
}

/**
 * `values` (one array per tensor of `base`, in its order) as float32 tensors under `base`'s
 * names and dims. Throws (ValidationError) when a value is not finite in float32: a model with
 * one would poison every round after it.
 */
function toTensors(base: NamedTensors, values: readonly ArrayLike<number>[]): Map<string, Tensor> {
  const out = new Map<string, Tensor>();
  let t = 0;
  for (const [name, tensor] of base) {
    const rounded = Float32Array.from(values[t]!);
    checkFinite(`${name} of the aggregate`, rounded);
    out.set(name, { dims: [...tensor.dims], values: rounded });
    t += 1;
  }
  return out;
}

/** `base + delta` as float32 tensors (sum in float64, one rounding). */
function addDelta(base: NamedTensors, delta: readonly Float64Array[]): Map<string, Tensor> {
  const from = modelValues(base);
  return toTensors(
    base,
    delta.map((d, t) => d.map((x, i) => from[t]![i]! + x)),
  );
}

export { alignAll, modelValues, deltaOf, squaredNorm, toTensors, addDelta };
export type { AlignedUpdate };
