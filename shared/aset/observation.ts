/**
 * What the simulator samples for ASET's state encoding (paper section IV-B, eq. 11): per worker
 * w, (i) |I_w| the streams bound to it, (ii) R_w the responses it delivered, (iii) L_w its
 * reserved load, and (iv) for each cell of a partition of (D^i, rho_i), the sum of rho_i over the
 * streams bound to w whose deadline and rate fall in that cell.
 *
 * Our reading of (iv): the paper writes the sums over I_{a,b}, streams of all of I, yet lists
 * them in S_w, the per-worker vector; we take them per worker (streams of I_w in cell (a, b)),
 * which is what makes them a per-worker feature. They are the frame rates of the streams
 * currently bound ("incoming instant queries"), not counts of queries seen in the period.
 *
 * The lead's state tensor normalises and windows these samples; here they are raw, one
 * Float32Array row of `featuresPerWorker` values per worker, workers in `Worker.index` order.
 */

/**
 * Lower edges of the deadline cells, ms; the last cell is open. Chosen to separate Table I's
 * deadlines: [0, 25) the tightest Gaming/Remote-driving draws, [25, 40) Tele-Robots and the
 * rest of them, [40, 100) AR/VR's upper half and Pool, [100, 200) Ping-pong and Connected Cars,
 * [200, inf) Workout, Face and Lego.
 */
const delayBinEdgesMs: readonly number[] = [0, 25, 40, 100, 200];

/**
 * Lower edges of the frame-rate cells, FPS; the last is open: [0, 10) Pool/Workout/Face,
 * [10, 20) Ping-pong/Lego/Cars/Tele-Robots, [20, inf) Gaming/Remote-driving/AR-VR.
 */
const rateBinEdgesFps: readonly number[] = [0, 10, 20];

/** Offsets of the scalar features within a worker's row. */
const STREAMS = 0;
const RESPONSES_PER_S = 1;
const LOAD = 2;
/** First of the Ndelta x Nrho rate sums, deadline-major: cell (a, b) is at BINS + a * Nrho + b. */
const BINS = 3;

/** 3 + Ndelta * Nrho: the length of S_{w,t} in eq. (11). */
const featuresPerWorker = BINS + delayBinEdgesMs.length * rateBinEdgesFps.length;

/** Names of a row's features, in order, for reports and debugging. */
const featureNames: readonly string[] = [
  'streams',
  'responsesPerS',
  'load',
  ...delayBinEdgesMs.flatMap((d, a) =>
    rateBinEdgesFps.map((r, b) => {
      const dHi = delayBinEdgesMs[a + 1] ?? 'inf';
      const rHi = rateBinEdgesFps[b + 1] ?? 'inf';
      return `rate[delay ${d}-${dHi} ms, rate ${r}-${rHi} fps]`;
    }),
  ),
];

/** Index of the last edge <= value (values below the first edge fall in the first cell). */
function cellOf(edges: readonly number[], value: number): number {
  let cell = 0;
  for (let i = 1; i < edges.length; i += 1) if (value >= edges[i]!) cell = i;
  return cell;
}

/** The feature offset (within a row) of the rate-sum cell a stream's D^i and rho_i fall in. */
function binOffset(maxDelayMs: number, rate: number): number {
  return (
    BINS +
    cellOf(delayBinEdgesMs, maxDelayMs) * rateBinEdgesFps.length +
    cellOf(rateBinEdgesFps, rate)
  );
}

/** One sample: the system at `timeMs`, and the outcomes of the period (timeMs - periodMs, timeMs]. */
interface Observation {
  readonly timeMs: number;
  /** Row-major [worker][feature], `workers * featuresPerWorker` values. */
  readonly features: Float32Array;
  /** Queries delivered within their deadline during the period. */
  readonly success: number;
  /** Queries delivered late, or dropped as certain to be late, during the period. */
  readonly qosFailure: number;
  /** Queries of rejected streams whose send time fell in the period. */
  readonly rejected: number;
}

/**
 * Keeps the per-worker stream state of eq. (11) up to date as streams are bound and released,
 * and counts deliveries, so a sample is one copy. `load(w)` is the reserved load L_w the
 * constraints check, kept here so feasibility and observation cannot disagree.
 */
class ObservationRecorder {
  private readonly state: Float64Array;
  private readonly responses: Float64Array;

  constructor(readonly workers: number) {
    this.state = new Float64Array(workers * featuresPerWorker);
    this.responses = new Float64Array(workers);
  }

  /** An independent recorder with the same per-worker state and response counts. */
  clone(): ObservationRecorder {
    const copy = new ObservationRecorder(this.workers);
    copy.state.set(this.state);
    copy.responses.set(this.responses);
    return copy;
  }

  /** L_w: sum of size * rate over the streams bound to `worker`. */
  load(worker: number): number {
    return this.state[worker * featuresPerWorker + LOAD]!;
  }

  /** |I_w|. */
  streams(worker: number): number {
    return this.state[worker * featuresPerWorker + STREAMS]!;
  }

  bind(worker: number, maxDelayMs: number, rate: number, size: number): void {
    const row = worker * featuresPerWorker;
    const s = this.state;
    s[row + STREAMS]! += 1;
    s[row + LOAD]! += size * rate;
    s[row + binOffset(maxDelayMs, rate)]! += rate;
  }

  release(worker: number, maxDelayMs: number, rate: number, size: number): void {
    const row = worker * featuresPerWorker;
    const s = this.state;
    s[row + STREAMS]! -= 1;
    if (s[row + STREAMS] === 0) {
      // Nothing bound: reset the sums exactly, so float residue of many +/- cannot accumulate.
      s.fill(0, row, row + featuresPerWorker);
      return;
    }
    s[row + LOAD]! -= size * rate;
    s[row + binOffset(maxDelayMs, rate)]! -= rate;
  }

  /** One response of `worker` reached its client. */
  respond(worker: number): void {
    this.responses[worker]! += 1;
  }

  /** The sample at `timeMs` for the period of `periodMs` just ended; restarts the response counts. */
  sample(
    timeMs: number,
    periodMs: number,
    outcomes: { success: number; qosFailure: number; rejected: number },
  ): Observation {
    const features = new Float32Array(this.state);
    const perSecond = 1000 / periodMs;
    for (let w = 0; w < this.workers; w += 1) {
      features[w * featuresPerWorker + RESPONSES_PER_S] = this.responses[w]! * perSecond;
    }
    this.responses.fill(0);
    return { timeMs, features, ...outcomes };
  }
}

export {
  featuresPerWorker,
  featureNames,
  binOffset,
  STREAMS,
  RESPONSES_PER_S,
  LOAD,
  BINS,
  ObservationRecorder,
};
export type { Observation };
