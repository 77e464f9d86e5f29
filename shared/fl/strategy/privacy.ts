/**
 * Central differential privacy with fixed clipping (Flower's
 * DifferentialPrivacyServerSideFixedClipping; Andrew et al. / McMahan et al. 2018, "Learning
 * Differentially Private Recurrent Language Models"): every update's delta from the model is
 * scaled by min(1, C / ||delta||) (Flower's compute_clip_model_update), the clipped deltas are
 * averaged, and Gaussian noise of standard deviation z C / n (Flower's compute_stdv) is added to
 * every coordinate of the mean. The server optimizer (if any) then steps along the noisy mean.
 *
 * Where ours differs from Flower's, and why:
 * - the mean is unweighted with the fixed denominator n = sampledClients (McMahan et al.'s
 *   estimator): one client then moves it by at most C / n, the sensitivity the noise is
 *   calibrated to. Flower hands the clipped updates to the wrapped strategy, whose
 *   sample-weighted mean one client can move by up to C (its share of the samples), and divides
 *   by the count that arrived; with all n sampled clients reporting equal sample counts the two
 *   agree exactly.
 * - the noise goes on the mean before the server optimizer, not on its output as Flower's wrapper
 *   does: the optimizer is then post-processing and the guarantee holds for FedAdam too.
 * - the noise is seeded (reproducible runs); its seed must stay secret, as numpy's is.
 * Every arithmetic step is float64; the clipped deltas are never rounded to float32.
 */
import { ValidationError } from '../../errors/index.js';
import { SeededRandom } from '../../random/index.js';
import type { WeightUpdate } from '../fedavg.js';
import type { NamedTensors } from '../weights.js';
import { streamSeed } from './seeds.js';
import { alignAll, deltaOf, modelValues, squaredNorm } from './tensors.js';
import type { CentralDp, Verdict } from './types.js';

/** Flower's compute_stdv: noise_multiplier * clipping_norm / num_sampled_clients. */
function noiseStdv(noiseMultiplier: number, clippingNorm: number, sampledClients: number): number {
  return (noiseMultiplier * clippingNorm) / sampledClients;
}

/**
 * `delta` scaled by min(1, C / ||delta||) in place (a zero delta stays zero); says whether it
 * was scaled down. The result's L2 norm is at most C (up to float64 rounding).
 */
function clipInPlace(delta: Float64Array[], clippingNorm: number): boolean {
  const norm = Math.sqrt(squaredNorm(delta));
  const factor = Math.min(1, clippingNorm / norm);
  if (!(factor < 1)) return false;
  for (const part of delta) for (let i = 0; i < part.length; i += 1) part[i]! *= factor;
  return true;
}

/** Throws unless the DP parameters are in range (the noise scale and the accountant need them). */
function checkCentralDp(dp: CentralDp): void {
  const { noiseMultiplier, clippingNorm, sampledClients, seed } = dp;
  if (!Number.isFinite(noiseMultiplier) || noiseMultiplier < 0) {
    throw new ValidationError(`dp noiseMultiplier ${noiseMultiplier} is not a finite number >= 0`);
  }
  if (!Number.isFinite(clippingNorm) || clippingNorm <= 0) {
    throw new ValidationError(`dp clippingNorm ${clippingNorm} is not a finite number > 0`);
  }
  if (!Number.isSafeInteger(sampledClients) || sampledClients < 1) {
    throw new ValidationError(`dp sampledClients ${sampledClients} is not an integer >= 1`);
  }
  if (!Number.isSafeInteger(seed)) throw new ValidationError(`dp seed ${seed} is not an integer`);
}

interface PrivateMean {
  /** The noisy mean delta, one float64 array per tensor of the model, in its order. */
  readonly delta: Float64Array[];
  readonly clipped: readonly Verdict[];
  readonly stdv: number;
}

/**
 * The clipped, averaged and noised delta of `updates` from `base` for `round` (the noise's
 * stream is the DP seed's for that round). Refuses (ValidationError) what fedavg.ts refuses.
 */
function privateMeanDelta(
  base: NamedTensors,
  updates: readonly WeightUpdate[],
  dp: CentralDp,
  round: number,
): PrivateMean {
  checkCentralDp(dp);
  const from = modelValues(base);
  const sum = from.map((v) => new Float64Array(v.length));
  const clipped: Verdict[] = [];
  for (const update of alignAll(base, updates)) {
    const delta = deltaOf(update.values, from);
    if (clipInPlace(delta, dp.clippingNorm)) {
      clipped.push({
        worker: update.worker,
        reason: `delta over the clipping norm ${dp.clippingNorm}`,
      });
    }
    delta.forEach((part, t) => {
      const s = sum[t]!;
      for (let i = 0; i < part.length; i += 1) s[i]! += part[i]!;
    });
  }
  const stdv = noiseStdv(dp.noiseMultiplier, dp.clippingNorm, dp.sampledClients);
  const { normal } = new SeededRandom(streamSeed(dp.seed, round, 'dp-noise'));
  for (const s of sum) {
    for (let i = 0; i < s.length; i += 1) s[i] = s[i]! / dp.sampledClients + stdv * normal();
  }
  return { delta: sum, clipped, stdv };
}

export { noiseStdv, clipInPlace, checkCentralDp, privateMeanDelta };
export type { PrivateMean };
