/**
 * Feasibility of binding a stream to a worker: constraints (1)-(4) of the ASET paper's section
 * III-B, written term for term as the paper states them, and the figures (network delay, expected
 * end-to-end delay) the static policies of section III-C rank the feasible workers by.
 *
 * `violations` explains a decision (every failing constraint, by name); `feasibleCandidates` is the
 * hot path the simulator calls once per stream arrival, and decides exactly as `violations` does
 * because both go through the same per-constraint checks below.
 */
import type {
  Candidate,
  ConstraintName,
  Link,
  Scheduler,
  Stream,
  Variant,
  Worker,
} from './types.js';

/**
 * Relative slack on every `<=` / `>=` of constraints (2)-(4). The profiles and requirements are
 * written as decimals while the arithmetic is binary, and constraint (3) sums five terms whose
 * rounding depends on their order: a left side that is equal to its bound on paper can land a few
 * ulps (~1e-16 relative) above it. 1e-9 relative absorbs that by seven orders of magnitude while
 * staying far below anything the model can express: at a bound of 100 ms it is 0.1 ns, at
 * 1,000 queries/s it is 1e-6 queries/s.
 */
const RELATIVE_TOLERANCE = 1e-9;

/** `value <= bound` up to `RELATIVE_TOLERANCE`; an infinite bound admits every finite value. */
function atMost(value: number, bound: number): boolean {
  if (value <= bound) return true;
  // Past the fast path value > bound, so Infinity - Infinity (NaN) cannot occur here.
  return value - bound <= RELATIVE_TOLERANCE * Math.max(Math.abs(value), Math.abs(bound));
}

/**
 * D_v(zeta): the paper profiles a variant at its largest input (D_v) and lets the delay vary with
 * the input size; we interpolate linearly from the size-independent part, so D_v(1) = maxDelayMs.
 */
function processingDelayMs(variant: Variant, size: number): number {
  return variant.fixedDelayMs + (variant.maxDelayMs - variant.fixedDelayMs) * size;
}

/**
 * d_n^s + 2 sigma_n^s: the paper budgets a path at two deviations above its mean, so a query
 * admitted on it meets its deadline on all but the slowest few percent of network draws.
 */
function networkMs(link: Link): number {
  return link.delayMs + 2 * link.deviationMs;
}

/** The scheduler's link to the worker's cluster; a missing one is a topology bug, not a verdict. */
function linkTo(scheduler: Scheduler, worker: Worker): Link {
  const link = scheduler.links[worker.cluster.id];
  if (link === undefined) {
    throw new Error(
      `scheduler ${scheduler.id} has no link to cluster ${worker.cluster.id} (worker ${worker.index})`,
    );
  }
  return link;
}

/** (1): v in V^m and m in M^j. */
function taskHolds(stream: Stream, worker: Worker): boolean {
  return worker.model.task === stream.task;
}

/** (2): L_vn(t) + eta_v^i rho_i <= C_v, with eta_v^i = zeta_i (capacity counts size-1 queries). */
function capacityHolds(stream: Stream, worker: Worker, load: number): boolean {
  return atMost(load + stream.size * stream.rate, worker.capacity);
}

/** (3): 2 (delta_i + d_n^s + 2 sigma_n^s) + b_i zeta_i + D_v(zeta_i) <= D^i, in the paper's order. */
function delayHolds(stream: Stream, link: Link, worker: Worker): boolean {
  const endToEnd =
    2 * (stream.accessDelayMs + link.delayMs + 2 * link.deviationMs) +
    stream.transmissionMsPerSize * stream.size +
    processingDelayMs(worker.variant, stream.size);
  return atMost(endToEnd, stream.maxDelayMs);
}

/** (4): A_m >= A^i. */
function accuracyHolds(stream: Stream, worker: Worker): boolean {
  return atMost(stream.minAccuracy, worker.model.accuracy);
}

/**
 * The figures the policies rank `worker` by for this stream. Throws when the scheduler has no link
 * to the worker's cluster: every scheduler reaches every cluster in the paper's model, so a missing
 * link means the topology was built wrong and no answer would be meaningful.
 */
function candidateFor(
  stream: Stream,
  scheduler: Scheduler,
  worker: Worker,
  load: number,
): Candidate {
  return candidateOn(stream, linkTo(scheduler, worker), worker, load);
}

function candidateOn(stream: Stream, link: Link, worker: Worker, load: number): Candidate {
  const network = networkMs(link);
  return {
    worker,
    load,
    networkMs: network,
    expectedMs: 2 * network + processingDelayMs(worker.variant, stream.size),
  };
}

/**
 * Every constraint binding `stream` to `worker` (currently loaded with `load`) would break, in the
 * paper's order (1)-(4); empty means feasible. For explaining a rejection: the hot path is
 * `feasibleCandidates`, which decides identically. Throws on a missing link, as `candidateFor`.
 */
function violations(
  stream: Stream,
  scheduler: Scheduler,
  worker: Worker,
  load: number,
): ConstraintName[] {
  const link = linkTo(scheduler, worker);
  const failed: ConstraintName[] = [];
  if (!taskHolds(stream, worker)) failed.push('task');
  if (!capacityHolds(stream, worker, load)) failed.push('capacity');
  if (!delayHolds(stream, link, worker)) failed.push('delay');
  if (!accuracyHolds(stream, worker)) failed.push('accuracy');
  return failed;
}

/**
 * The workers `stream` may be bound to, as candidates in the order of `workers` (the topology keeps
 * them by `index`, which the deterministic policies' tie-breaks rely on). Called once per stream
 * arrival, so it allocates only the result: the cheap field comparisons run first and `loadOf` is
 * asked only about workers that passed them. Throws on a missing link, as `candidateFor`, even
 * for a worker that fails another constraint, so a broken topology is caught on the first arrival.
 */
function feasibleCandidates(
  stream: Stream,
  scheduler: Scheduler,
  workers: readonly Worker[],
  loadOf: (worker: Worker) => number,
): Candidate[] {
  const feasible: Candidate[] = [];
  for (const worker of workers) {
    const link = linkTo(scheduler, worker);
    if (!taskHolds(stream, worker) || !accuracyHolds(stream, worker)) continue;
    if (!delayHolds(stream, link, worker)) continue;
    const load = loadOf(worker);
    if (!capacityHolds(stream, worker, load)) continue;
    feasible.push(candidateOn(stream, link, worker, load));
  }
  return feasible;
}

export { processingDelayMs, networkMs, candidateFor, violations, feasibleCandidates };
