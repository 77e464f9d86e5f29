/**
 * The one entry the aggregator calls: a round's updates, the model they trained from and the
 * strategy's state in; the next model, the next state and the report out. Pure and
 * deterministic: the same inputs give the same bytes whatever order the updates arrived in.
 */
import { ValidationError } from '../../errors/index.js';
import { fedAvg } from '../fedavg.js';
import type { WeightUpdate } from '../fedavg.js';
import type { NamedTensors } from '../weights.js';
import { krum } from './krum.js';
import { checkCentralDp, privateMeanDelta } from './privacy.js';
import { serverOptStep } from './server-opt.js';
import { addDelta, deltaOf, modelValues } from './tensors.js';
import { trimmedMean } from './trimmed-mean.js';
import type {
  AggregationReport,
  AggregationResult,
  AveragingStrategy,
  FedOpt,
  Strategy,
  StrategyState,
} from './types.js';

const inUnit = (x: number) => Number.isFinite(x) && x >= 0 && x < 1;
const positive = (x: number) => Number.isFinite(x) && x > 0;

function checkFedOpt(opt: FedOpt): void {
  const { kind, eta, etaL, tau } = opt;
  if (!positive(eta)) throw new ValidationError(`${kind} eta ${eta} is not a finite number > 0`);
  if (etaL !== undefined && !positive(etaL)) {
    throw new ValidationError(`${kind} etaL ${etaL} is not a finite number > 0`);
  }
  if (!positive(tau)) throw new ValidationError(`${kind} tau ${tau} is not a finite number > 0`);
  if (opt.kind === 'fedadagrad') return;
  if (!inUnit(opt.beta1)) throw new ValidationError(`${kind} beta1 ${opt.beta1} is not in [0, 1)`);
  if (!inUnit(opt.beta2)) throw new ValidationError(`${kind} beta2 ${opt.beta2} is not in [0, 1)`);
}

/**
 * Throws (ValidationError, naming the field) unless every parameter of `strategy` is in range:
 * what the CRD's validation and the aggregator's loading should both run.
 */
function checkStrategy(strategy: Strategy): void {
  switch (strategy.kind) {
    case 'fedavg':
      return;
    case 'fedprox':
      if (!(Number.isFinite(strategy.mu) && strategy.mu >= 0)) {
        throw new ValidationError(`fedprox mu ${strategy.mu} is not a finite number >= 0`);
      }
      return;
    case 'fedtrimmedavg':
      if (!(strategy.beta >= 0 && strategy.beta < 0.5)) {
        throw new ValidationError(`fedtrimmedavg beta ${strategy.beta} is not in [0, 0.5)`);
      }
      return;
    case 'krum':
      if (!Number.isSafeInteger(strategy.f) || strategy.f < 0) {
        throw new ValidationError(`krum f ${strategy.f} is not an integer >= 0`);
      }
      if (!Number.isSafeInteger(strategy.m) || strategy.m < 1) {
        throw new ValidationError(`krum m ${strategy.m} is not an integer >= 1`);
      }
      return;
    case 'dp-fixed-clipping':
      checkCentralDp(strategy);
      if ((strategy.inner.kind as string) === 'dp-fixed-clipping') {
        throw new ValidationError('dp-fixed-clipping cannot wrap itself');
      }
      checkStrategy(strategy.inner);
      return;
    default:
      checkFedOpt(strategy);
  }
}

const report = (strategy: Strategy, extra: Partial<AggregationReport> = {}): AggregationReport => ({
  strategy: strategy.kind,
  rejected: [],
  clipped: [],
  ...extra,
});

/** The server step of an averaging strategy along a mean delta from `base`. */
function stepAlong(
  inner: AveragingStrategy,
  base: NamedTensors,
  delta: Float64Array[],
  state: StrategyState,
  round: number,
): Pick<AggregationResult, 'weights' | 'state'> {
  if (inner.kind === 'fedavg' || inner.kind === 'fedprox')
    return { weights: addDelta(base, delta), state };
  return serverOptStep(inner, base, delta, state, round);
}

/**
 * The next model from `updates` (trained from `base`) by `strategy`, in server round `round`
 * (1-based, as Flower counts: FedAdam's bias correction and central DP's noise stream use it),
 * with `state` from the previous round (initialState at first). Refuses (ValidationError) a
 * parameter out of range, no updates, a repeated worker, an update whose tensors do not fit
 * `base`, a non-finite value, a state of another optimizer or shape, and a non-finite result.
 */
function aggregate(
  strategy: Strategy,
  base: NamedTensors,
  updates: readonly WeightUpdate[],
  state: StrategyState,
  round: number,
): AggregationResult {
  checkStrategy(strategy);
  if (!Number.isSafeInteger(round) || round < 1) {
    throw new ValidationError(`round ${round} is not an integer >= 1`);
  }
  switch (strategy.kind) {
    case 'fedavg':
    case 'fedprox':
      return { weights: fedAvg(base, updates), state, report: report(strategy) };
    case 'fedtrimmedavg':
      return {
        weights: trimmedMean(base, updates, strategy.beta),
        state,
        report: report(strategy),
      };
    case 'krum': {
      const { weights, rejected } = krum(base, updates, strategy.f, strategy.m);
      return { weights, state, report: report(strategy, { rejected }) };
    }
    case 'dp-fixed-clipping': {
      const { delta, clipped, stdv } = privateMeanDelta(base, updates, strategy, round);
      const next = stepAlong(strategy.inner, base, delta, state, round);
      return { ...next, report: report(strategy, { clipped, noiseStdv: stdv }) };
    }
    default: {
      const mean = modelValues(fedAvg(base, updates));
      const next = serverOptStep(strategy, base, deltaOf(mean, modelValues(base)), state, round);
      return { ...next, report: report(strategy) };
    }
  }
}

export { aggregate, checkStrategy };
