/**
 * The privacy spent by central DP, by the RDP accountant of the sampled Gaussian mechanism
 * (Mironov, Talwar, Zhang 2019, "Rényi Differential Privacy of the Sampled Gaussian Mechanism",
 * Section 3.3, integer orders), ported from TensorFlow Privacy's rdp_accountant.py
 * (_compute_log_a_int, _compute_rdp, compute_rdp, _compute_eps; as of its last version before
 * the move to Google's dp_accounting, commit 868cf54^ of tensorflow/privacy), which Opacus's
 * accountants/analysis/rdp.py repeats. RDP -> (epsilon, delta) is TF Privacy's _compute_eps
 * (Canonne, Kamath, Steinke 2020, Proposition 12 / Balle et al. 2020, Theorem 21).
 *
 * No npm package offers an RDP accountant (the one "differential-privacy" package is the Laplace
 * mechanism), hence the port. Only integer orders are computed (the fractional-order series
 * needs log erfc to full precision); with fewer orders the epsilon is an upper bound at least as
 * large as the libraries' default order grid gives.
 *
 * In federated terms one round is one step of the mechanism with q = sampled / available clients
 * and sigma = the noise multiplier (privacy.ts calibrates the noise to the clipped mean's
 * sensitivity). The analysis assumes Poisson sampling; Flower and this project sample a fixed
 * number without replacement, the usual approximation (Flower's and TFF's tutorials make it too).
 */
import { ValidationError } from '../../errors/index.js';

/**
 * Orders 2..64 (the integer orders of TF Privacy's and Opacus's default grid, which stops at 63)
 * and a few larger ones, which give the optimum when epsilon is small.
 */
const defaultOrders: readonly number[] = [
  ...Array.from({ length: 63 }, (_, i) => i + 2),
  80,
  96,
  128,
  256,
];

/** log(exp(x) + exp(y)) without overflow (TF Privacy's _log_add). */
function logAdd(x: number, y: number): number {
  const a = Math.min(x, y);
  const b = Math.max(x, y);
  if (a === -Infinity) return b;
  return Math.log1p(Math.exp(a - b)) + b;
}

/** log n! for n = 0..max, summed (exact to float64 rounding for the orders used here). */
function logFactorials(max: number): Float64Array {
  const out = new Float64Array(max + 1);
  for (let n = 2; n <= max; n += 1) out[n] = out[n - 1]! + Math.log(n);
  return out;
}

/** log(A_alpha) for integer alpha and 0 < q < 1 (TF Privacy's _compute_log_a_int). */
function logAInt(q: number, sigma: number, alpha: number): number {
  const logFact = logFactorials(alpha);
  let logA = -Infinity;
  for (let i = 0; i <= alpha; i += 1) {
    const logCoef =
      logFact[alpha]! -
      logFact[i]! -
      logFact[alpha - i]! +
      i * Math.log(q) +
      (alpha - i) * Math.log(1 - q);
    logA = logAdd(logA, logCoef + (i * i - i) / (2 * sigma ** 2));
  }
  return logA;
}

/** RDP of the sampled Gaussian mechanism at one order (TF Privacy's / Opacus's _compute_rdp). */
function rdpAt(q: number, sigma: number, alpha: number): number {
  if (q === 0) return 0;
  if (sigma === 0) return Infinity;
  if (q === 1) return alpha / (2 * sigma ** 2);
  return logAInt(q, sigma, alpha) / (alpha - 1);
}

/**
 * RDP of `steps` compositions of the sampled Gaussian mechanism with sampling rate `q` and noise
 * multiplier `noiseMultiplier`, at each of `orders` (integers >= 2): compute_rdp.
 */
function computeRdp(
  q: number,
  noiseMultiplier: number,
  steps: number,
  orders: readonly number[] = defaultOrders,
): number[] {
  if (!(q >= 0 && q <= 1)) throw new ValidationError(`sampling rate ${q} is not in [0, 1]`);
  if (!(noiseMultiplier >= 0)) {
    throw new ValidationError(`noise multiplier ${noiseMultiplier} is not >= 0`);
  }
  if (!Number.isSafeInteger(steps) || steps < 0) {
    throw new ValidationError(`steps ${steps} is not an integer >= 0`);
  }
  for (const order of orders) {
    if (!Number.isSafeInteger(order) || order < 2 || order > 10_000) {
      throw new ValidationError(`RDP order ${order} is not an integer in [2, 10000]`);
    }
  }
  return orders.map((alpha) => rdpAt(q, noiseMultiplier, alpha) * steps);
}

/**
 * The smallest epsilon for `delta` over `orders` given their RDP values, and the order that
 * gives it (TF Privacy's _compute_eps, Proposition 12 of Canonne, Kamath, Steinke 2020).
 */
function privacySpent(
  orders: readonly number[],
  rdp: readonly number[],
  delta: number,
): { epsilon: number; order: number } {
  if (orders.length !== rdp.length || orders.length === 0) {
    throw new ValidationError(`${orders.length} orders for ${rdp.length} RDP values`);
  }
  if (!(delta > 0 && delta < 1)) throw new ValidationError(`delta ${delta} is not in (0, 1)`);
  let best = { epsilon: Infinity, order: orders[0]! };
  orders.forEach((a, k) => {
    const r = rdp[k]!;
    if (!(r >= 0)) throw new ValidationError(`RDP value ${r} at order ${a} is not >= 0`);
    const epsilon =
      delta ** 2 + Math.expm1(-r) >= 0
        ? 0
        : a > 1.01
          ? r + Math.log1p(-1 / a) - Math.log(delta * a) / (a - 1)
          : Infinity;
    if (epsilon < best.epsilon) best = { epsilon, order: a };
  });
  return { epsilon: Math.max(0, best.epsilon), order: best.order };
}

/**
 * Epsilon spent after `rounds` rounds of central DP that each sample a fraction `samplingRate`
 * of the clients and add noise of multiplier `noiseMultiplier`, for `delta`.
 */
function epsilonSpent(options: {
  samplingRate: number;
  noiseMultiplier: number;
  rounds: number;
  delta: number;
  orders?: readonly number[];
}): { epsilon: number; order: number } {
  const { samplingRate, noiseMultiplier, rounds, delta, orders = defaultOrders } = options;
  return privacySpent(orders, computeRdp(samplingRate, noiseMultiplier, rounds, orders), delta);
}

export { computeRdp, privacySpent, epsilonSpent, defaultOrders };
