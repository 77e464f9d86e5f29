/**
 * What a federated job aggregates with (Flower's strategies, by name and parameter), the state a
 * strategy carries from round to round, and the report of what it did to whose update. A report
 * names workers and states reasons; it never carries a value computed from one update (a norm,
 * a score, a weight): the status shows it, and an individual update never reaches a status.
 */
import type { NamedTensors, Tensor } from '../weights.js';

/** Flower's server optimizers (fedopt.py), applied to the pseudo-gradient fedavg - base. */
type FedOptKind = 'fedadam' | 'fedyogi' | 'fedadagrad';

/** FedAdam and FedYogi (Reddi et al. 2021, "Adaptive Federated Optimization"). */
interface AdaptiveOpt {
  readonly kind: 'fedadam' | 'fedyogi';
  /** Server learning rate. */
  readonly eta: number;
  /** The trainers' learning rate: handed to them, unused by the server (as in Flower). */
  readonly etaL?: number;
  /** Momentum of the first moment, in [0, 1). */
  readonly beta1: number;
  /** Decay of the second moment, in [0, 1). */
  readonly beta2: number;
  /** Adaptivity: added to sqrt(v) in the denominator, > 0. */
  readonly tau: number;
}

/** FedAdagrad: Flower fixes beta1 = 0 (no momentum) and sums squared pseudo-gradients. */
interface AdagradOpt {
  readonly kind: 'fedadagrad';
  readonly eta: number;
  readonly etaL?: number;
  readonly tau: number;
}

type FedOpt = AdaptiveOpt | AdagradOpt;

/** The strategies whose server step consumes a mean (which central DP can privatise). */
type AveragingStrategy =
  | { readonly kind: 'fedavg' }
  /** FedProx (Li et al. 2020): `mu` is the trainers' proximal term (local-train.ts's
   * proximalMu); the server side is FedAvg's. */
  | { readonly kind: 'fedprox'; readonly mu: number }
  | FedOpt;

/**
 * Central differential privacy with fixed clipping around an averaging strategy (Flower's
 * DifferentialPrivacyServerSideFixedClipping; see privacy.ts for where and why ours differs).
 */
interface CentralDp {
  readonly kind: 'dp-fixed-clipping';
  /** z: the noise's standard deviation over the clipped mean's sensitivity. >= 0. */
  readonly noiseMultiplier: number;
  /** C: every update's delta from the model is scaled to an L2 norm of at most C. > 0. */
  readonly clippingNorm: number;
  /** n: the clients sampled per round; the mean's denominator and the noise's divisor. */
  readonly sampledClients: number;
  /** Seeds the noise (with the round). Keep it secret: whoever knows it can subtract the noise. */
  readonly seed: number;
  readonly inner: AveragingStrategy;
}

type Strategy =
  | AveragingStrategy
  /** Coordinate-wise trimmed mean, `beta` of the updates cut at each end (unweighted). */
  | { readonly kind: 'fedtrimmedavg'; readonly beta: number }
  /** Krum (m = 1) or MultiKrum (m > 1) against `f` Byzantine updates. */
  | { readonly kind: 'krum'; readonly f: number; readonly m: number }
  | CentralDp;

/**
 * What a strategy carries between rounds: nothing, or a server optimizer's moments (float32,
 * in the model's names and dims, as Flower keeps them).
 */
type StrategyState =
  | { readonly kind: 'none' }
  | {
      readonly kind: 'moments';
      readonly optimizer: FedOptKind;
      readonly m: NamedTensors;
      readonly v: NamedTensors;
    };

/** A worker and why its update was rejected or changed. */
interface Verdict {
  readonly worker: string;
  readonly reason: string;
}

interface AggregationReport {
  readonly strategy: Strategy['kind'];
  /** Updates left out of the aggregate (Krum's unselected), in worker order. */
  readonly rejected: readonly Verdict[];
  /** Updates scaled down to the clipping norm (central DP), in worker order. */
  readonly clipped: readonly Verdict[];
  /** Central DP's noise standard deviation: a function of the configuration alone. */
  readonly noiseStdv?: number;
}

interface AggregationResult {
  readonly weights: Map<string, Tensor>;
  readonly state: StrategyState;
  readonly report: AggregationReport;
}

export type {
  FedOptKind,
  AdaptiveOpt,
  AdagradOpt,
  FedOpt,
  AveragingStrategy,
  CentralDp,
  Strategy,
  StrategyState,
  Verdict,
  AggregationReport,
  AggregationResult,
};
