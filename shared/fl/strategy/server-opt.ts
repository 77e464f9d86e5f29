/**
 * Server optimizers (Reddi et al. 2021, "Adaptive Federated Optimization"), exactly as Flower's
 * fedadam.py, fedyogi.py and fedadagrad.py step them: with the pseudo-gradient
 * delta = aggregate - model, m = beta1 m + (1 - beta1) delta and
 *   FedAdam:    v = beta2 v + (1 - beta2) delta^2, eta_t = eta sqrt(1 - beta2^(r+1)) / (1 - beta1^(r+1))
 *   FedYogi:    v = v - (1 - beta2) delta^2 sign(v - delta^2), eta_t = eta
 *   FedAdagrad: v = v + delta^2 (beta1 = 0), eta_t = eta
 * then model + eta_t m / (sqrt(v) + tau), elementwise. As in Flower, m and v start at zero (not
 * at tau^2, as the paper's Algorithm 2 has v), FedAdam's bias correction uses the server round r
 * (1-based) plus one, and m and v are float32 (one rounding per round); the arithmetic of a step
 * is float64.
 */
import { ValidationError } from '../../errors/index.js';
import type { NamedTensors, Tensor } from '../weights.js';
import { modelValues, toTensors } from './tensors.js';
import { fedOptDefaults } from '../../messages/federated.js';
import type { FedOpt, FedOptKind, StrategyState } from './types.js';

/** The moments to start from: the state's (checked against the model), or zeros. */
function startingMoments(
  kind: FedOptKind,
  base: NamedTensors,
  state: StrategyState,
): { m: Float32Array[]; v: Float32Array[] } {
  if (state.kind === 'none') {
    const zeros = () => modelValues(base).map((v) => new Float32Array(v.length));
    return { m: zeros(), v: zeros() };
  }
  if (state.optimizer !== kind) {
    throw new ValidationError(
      `the state holds ${state.optimizer} moments, the strategy is ${kind}`,
    );
  }
  const aligned = (which: 'm' | 'v', tensors: NamedTensors) => {
    if (tensors.size !== base.size) {
      throw new ValidationError(
        `state ${which} has ${tensors.size} tensors, the model ${base.size}`,
      );
    }
    return [...base].map(([name, tensor]) => {
      const got = tensors.get(name);
      if (got === undefined || got.values.length !== tensor.values.length) {
        throw new ValidationError(`state ${which}: tensor ${name} is missing or of another size`);
      }
      return got.values;
    });
  };
  return { m: aligned('m', state.m), v: aligned('v', state.v) };
}

/** One server step from `base` along `delta` (one float64 array per tensor, in base's order). */
function serverOptStep(
  opt: FedOpt,
  base: NamedTensors,
  delta: readonly Float64Array[],
  state: StrategyState,
  round: number,
): { weights: Map<string, Tensor>; state: StrategyState } {
  const { m: m0, v: v0 } = startingMoments(opt.kind, base, state);
  const beta1 = opt.kind === 'fedadagrad' ? 0 : opt.beta1;
  const beta2 = opt.kind === 'fedadagrad' ? 0 : opt.beta2;
  const eta =
    opt.kind === 'fedadam'
      ? (opt.eta * Math.sqrt(1 - beta2 ** (round + 1))) / (1 - beta1 ** (round + 1))
      : opt.eta;
  const from = modelValues(base);
  const m = delta.map((d) => new Float32Array(d.length));
  const v = delta.map((d) => new Float32Array(d.length));
  const next = delta.map((d, t) => {
    const out = new Float64Array(d.length);
    for (let i = 0; i < d.length; i += 1) {
      const g = d[i]!;
      const oldV = v0[t]![i]!;
      m[t]![i] = beta1 * m0[t]![i]! + (1 - beta1) * g;
      v[t]![i] =
        opt.kind === 'fedadam'
          ? beta2 * oldV + (1 - beta2) * g * g
          : opt.kind === 'fedyogi'
            ? oldV - (1 - beta2) * g * g * Math.sign(oldV - g * g)
            : oldV + g * g;
      out[i] = from[t]![i]! + (eta * m[t]![i]!) / (Math.sqrt(v[t]![i]!) + opt.tau);
    }
    return out;
  });
  const named = (values: Float32Array[]) => toTensors(base, values);
  return {
    weights: toTensors(base, next),
    state: { kind: 'moments', optimizer: opt.kind, m: named(m), v: named(v) },
  };
}

export { serverOptStep, fedOptDefaults };
