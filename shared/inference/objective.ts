/**
 * The decisions behind an accuracy objective, pure so they can be checked on synthetic streams:
 * which hardness band each sample falls in, how far the edge's answers disagree with the cloud's
 * band by band, the offload cut that keeps the estimated loss within the objective, and whether
 * the recent inputs have drifted from the reference.
 *
 * The loss is measured against the cloud, as the objective is stated: a sample the edge answers
 * costs accuracy exactly when the cloud would have answered it differently and been right, so the
 * share of edge-answered samples whose answer differs from the cloud's bounds that loss from
 * above (it also counts samples where the edge was right and the cloud wrong). No labels needed:
 * offloaded samples pair the two answers for free, and a shadow sample of edge-answered ones pays
 * for the rest.
 */

/**
 * Hardness bands: band 0 is [0, 1e-5]; bands 1..80 split (1e-5, 1] evenly in log10 (16 a decade).
 * A confident classifier puts most inputs at hardness 1e-4 or below, so even bands would lump
 * nearly all traffic into one and leave the cut nowhere to stand.
 */
const bandCount = 81;
const logFloor = -5;
const perDecade = (bandCount - 1) / -logFloor;

function bandOf(hardness: number): number {
  // NaN is no evidence of an easy input: the hardest band.
  if (Number.isNaN(hardness)) return bandCount - 1;
  if (!(hardness > 10 ** logFloor)) return 0;
  const band = Math.ceil((Math.log10(hardness) - logFloor) * perDecade);
  return Math.min(bandCount - 1, Math.max(1, band));
}

/** The hardness a cut at band `cut` offloads above (inputs in bands >= cut go to the cloud). */
function cutHardness(cut: number): number {
  if (cut <= 0) return 0;
  if (cut >= bandCount) return 1;
  return 10 ** (logFloor + (cut - 1) / perDecade);
}

/** Counts per band over the calibration window. */
interface BandCounts {
  /** Samples seen. */
  traffic: readonly number[];
  /** Samples with both answers (offloaded, or shadowed). */
  labelled: readonly number[];
  /** Their summed loss against the cloud (agreement.ts: 0 when the answers agree, at most 1). */
  disagree: readonly number[];
}

interface CalibrationSettings {
  /** Largest accepted loss against the cloud, as a fraction (1 point = 0.01). */
  objective: number;
  /** Standard errors added to the estimated loss before comparing it with the objective. */
  z: number;
  /** Labelled samples the window needs before any cut but "offload everything" is trusted. */
  minLabelled: number;
}

interface CutEstimate {
  /** Inputs in bands >= cut are offloaded (bandCount: none). */
  cut: number;
  /** Estimated loss against the cloud at this cut (fraction of all traffic). */
  loss: number;
  /** `loss` plus z standard errors: what was held to the objective. */
  upper: number;
  /** Share of the window's traffic at or above the cut. */
  offload: number;
  /** Estimated share of all inputs on which the edge agrees with the cloud. */
  edgeAgreement: number;
  labelled: number;
}

/** Bands pooled by the monotone fit: their labels and summed loss. */
interface Block {
  from: number;
  to: number;
  n: number;
  k: number;
}

/**
 * Bands pooled so their loss rates never fall as hardness rises (pool-adjacent-violators,
 * weighted by labels): on traffic like the reference a harder input does not lose less at the
 * edge, and pooling is what lets the thinly labelled bands just below the cut (shadow labels
 * only) borrow evidence from their neighbours.
 */
function monotoneBlocks(counts: BandCounts): Block[] {
  const blocks: Block[] = [];
  for (let b = 0; b < bandCount; b += 1) {
    const n = counts.labelled[b] ?? 0;
    if (n <= 0) continue;
    let next: Block = { from: b, to: b, n, k: Math.min(n, counts.disagree[b] ?? 0) };
    while (blocks.length > 0 && blocks.at(-1)!.k / blocks.at(-1)!.n >= next.k / next.n) {
      const last = blocks.pop()!;
      next = { from: last.from, to: next.to, n: last.n + next.n, k: last.k + next.k };
    }
    blocks.push(next);
  }
  return blocks;
}

/**
 * Each band's loss rate and the variance of its estimate. `monotone` pools bands (above); without
 * it each band stands on its own labels and thin bands are paid for in variance. Under drift the
 * edge is often confidently wrong, easy bands losing more than harder ones, and pooling them with
 * the well-labelled bands above the cut would read the shadow-labelled bands below it as safer
 * than they are: the caller drops the pooling then. A band with no label of its own (or pooled)
 * takes the pooled rate of the labelled bands at least as hard, with the variance of one label.
 */
function bandRates(counts: BandCounts, monotone: boolean): { rate: number[]; variance: number[] } {
  const n = Array.from({ length: bandCount }, (_, b) => counts.labelled[b] ?? 0);
  const k = n.map((labels, b) => Math.min(labels, counts.disagree[b] ?? 0));
  if (monotone) {
    for (const block of monotoneBlocks(counts)) {
      for (let b = block.from; b <= block.to; b += 1) {
        if (n[b]! > 0) {
          // Each labelled band of a block carries the block's rate and its evidence.
          n[b] = block.n;
          k[b] = block.k;
        }
      }
    }
  }
  const rate = new Array<number>(bandCount).fill(0);
  const variance = new Array<number>(bandCount).fill(0);
  let pooledK = 0;
  let pooledN = 0;
  for (let b = bandCount - 1; b >= 0; b -= 1) {
    pooledK += Math.min(counts.labelled[b] ?? 0, counts.disagree[b] ?? 0);
    pooledN += counts.labelled[b] ?? 0;
    rate[b] = n[b]! > 0 ? k[b]! / n[b]! : (pooledK + 0.5) / (pooledN + 1);
    // Half a pseudo-loss: a band with no loss seen is not known to lose nothing.
    const q = (k[b]! + 0.5) / (n[b]! + 1);
    variance[b] = (q * (1 - q)) / (n[b]! + 1);
  }
  return { rate, variance };
}

/**
 * The highest cut (least offload) whose estimated loss, plus `z` standard errors, is within the
 * objective. The loss of a cut is the traffic-weighted disagreement of the bands below it; its
 * variance, the sum of each band's binomial variance over its labels. Until the window holds
 * `minLabelled` labels, everything is offloaded: a cut needs evidence, and offloaded inputs are
 * the quickest way to get it (each one comes back labelled).
 */
function chooseCut(
  counts: BandCounts,
  settings: CalibrationSettings,
  /** False once the inputs are found to drift: see bandRates. */
  monotone = true,
): CutEstimate {
  let total = 0;
  let labelled = 0;
  for (let b = 0; b < bandCount; b += 1) {
    total += counts.traffic[b] ?? 0;
    labelled += counts.labelled[b] ?? 0;
  }
  const { rate, variance: bandVariance } = bandRates(counts, monotone);
  // Each band on its own labels: unbiased whatever the shape of the loss (see below).
  const raw = monotone ? bandRates(counts, false).rate : rate;
  let agreement = 1;
  if (total > 0) {
    for (let b = 0; b < bandCount; b += 1)
      agreement -= ((counts.traffic[b] ?? 0) / total) * rate[b]!;
  }
  const none: CutEstimate = {
    cut: 0,
    loss: 0,
    upper: 0,
    offload: 1,
    edgeAgreement: labelled > 0 ? agreement : Number.NaN,
    labelled,
  };
  if (total === 0 || labelled < settings.minLabelled) return none;
  let best = none;
  let fitted = 0;
  let observed = 0;
  let variance = 0;
  let below = 0;
  for (let cut = 1; cut <= bandCount; cut += 1) {
    const b = cut - 1;
    const p = (counts.traffic[b] ?? 0) / total;
    fitted += p * rate[b]!;
    observed += p * raw[b]!;
    variance += p * p * bandVariance[b]!;
    below += p;
    // The monotone fit can hide a shift the drift test does not flag (the edge confidently
    // wrong on easy inputs, pooled away with harder bands that lose less): the bands' own
    // rates, summed, are held to the objective too.
    const loss = Math.max(fitted, observed);
    const upper = Math.max(fitted + settings.z * Math.sqrt(variance), observed);
    // Loss only grows with the cut, so the first cut over the objective ends the search.
    if (upper > settings.objective) break;
    best = {
      cut,
      loss,
      upper,
      offload: Math.max(0, 1 - below),
      edgeAgreement: agreement,
      labelled,
    };
  }
  return best;
}

interface DriftSettings {
  /** Share of reference inputs above the outlier cut (e.g. 0.05 for its 95th percentile). */
  expectedShare: number;
  /** The condition is raised when the test statistic exceeds this... */
  raiseAt: number;
  /** ...and cleared when it falls below this (hysteresis: a noisy window does not flap). */
  clearAt: number;
  /** Fewer inputs than this decide nothing (the state stays). */
  minInputs: number;
}

interface DriftVerdict {
  /** One-sided z statistic of the outlier share against the reference's (0 when below it). */
  score: number;
  share: number;
  drifting: boolean;
}

/**
 * Seed 003's Skew check as a binomial test: under the reference, each input lands above the
 * reference's outlier cut with probability `expectedShare`; a window holding many more than that
 * has drifted.
 */
function driftTest(
  outliers: number,
  inputs: number,
  settings: DriftSettings,
  wasDrifting: boolean,
): DriftVerdict {
  if (inputs < settings.minInputs) {
    return { score: 0, share: inputs === 0 ? 0 : outliers / inputs, drifting: wasDrifting };
  }
  const p0 = settings.expectedShare;
  const share = outliers / inputs;
  const score = Math.max(0, (share - p0) / Math.sqrt((p0 * (1 - p0)) / inputs));
  const drifting = wasDrifting ? score > settings.clearAt : score > settings.raiseAt;
  return { score, share, drifting };
}

export { bandCount, bandOf, cutHardness, chooseCut, driftTest };
export type { BandCounts, CalibrationSettings, CutEstimate, DriftSettings, DriftVerdict };
