/**
 * The seven static scheduling policies of the ASET paper's section III-C: the baselines the paper
 * compares against and the action set the DQN chooses from at every decision. Each one picks among
 * candidates `feasibleCandidates` already filtered, so a policy only ranks, never checks.
 *
 * Tie-breaks are deterministic (lowest `worker.index`, the topology's stable order) so that a
 * simulation replays bit for bit from its seed, whatever order the caller lists candidates in.
 * Rankings compare the figures exactly: candidates on one cluster share one link and so have
 * identical network figures, and an exact comparison keeps the order a total one.
 */
import type { Candidate, Policy, PolicyName, Stream } from './types.js';
import { policyNames } from './types.js';

/**
 * The candidate with the lowest `score` (or highest, for `'max'`); equal scores go to the lowest
 * worker index. Throws on an empty list: the caller rejects a stream with no feasible worker
 * before asking a policy, so an empty list here is a caller bug.
 */
function best(
  feasible: readonly Candidate[],
  score: (candidate: Candidate) => number,
  direction: 'min' | 'max',
): Candidate {
  let chosen = first(feasible);
  let chosenScore = score(chosen);
  for (let k = 1; k < feasible.length; k++) {
    const candidate = feasible[k]!;
    const value = score(candidate);
    const better = direction === 'min' ? value < chosenScore : value > chosenScore;
    if (better || (value === chosenScore && candidate.worker.index < chosen.worker.index)) {
      chosen = candidate;
      chosenScore = value;
    }
  }
  return chosen;
}

function first(feasible: readonly Candidate[]): Candidate {
  const candidate = feasible[0];
  if (candidate === undefined) throw new Error('a policy needs at least one feasible candidate');
  return candidate;
}

/**
 * Draws a candidate with probability proportional to `numerator / denominator`, by inverse CDF
 * over the list in its given order, from exactly one `uniform()` draw: the random stream then
 * advances by one per decision whatever the candidates, so two runs that diverge in one decision
 * stay aligned after it.
 *
 * The formulas' limits decide the singular cases. A zero denominator sends the weight to infinity,
 * so the candidates with one take all the probability, shared equally; a weight that overflows to
 * `Infinity` without one is treated the same way, one tier down. When every weight is 0 the
 * formula says nothing and the draw is uniform over all candidates. Weights are divided by the
 * largest one before they are summed, so large finite weights cannot overflow the total.
 */
function proportional(
  feasible: readonly Candidate[],
  uniform: () => number,
  numerator: (candidate: Candidate) => number,
  denominator: (candidate: Candidate) => number,
): Candidate {
  first(feasible);
  const u = uniform();
  const weight = (c: Candidate): number => numerator(c) / denominator(c);
  let singular = 0;
  let infinite = 0;
  let largest = 0;
  for (const candidate of feasible) {
    if (denominator(candidate) <= 0) {
      singular++;
      continue;
    }
    const w = weight(candidate);
    if (w === Infinity) infinite++;
    else if (w > largest) largest = w;
  }
  if (singular > 0) {
    return nthWhere(feasible, Math.floor(u * singular), (c) => denominator(c) <= 0);
  }
  if (infinite > 0) {
    return nthWhere(feasible, Math.floor(u * infinite), (c) => weight(c) === Infinity);
  }
  if (!(largest > 0)) return feasible[Math.floor(u * feasible.length)] ?? first(feasible);
  let total = 0;
  for (const candidate of feasible) {
    const w = weight(candidate) / largest;
    if (w > 0) total += w;
  }
  const target = u * total;
  let cumulative = 0;
  let lastPositive = first(feasible);
  for (const candidate of feasible) {
    const w = weight(candidate) / largest;
    if (!(w > 0)) continue;
    cumulative += w;
    if (cumulative > target) return candidate;
    lastPositive = candidate;
  }
  // u * total rounded up past the running sum's last partial: the draw belongs to the last bin.
  return lastPositive;
}

/** The `n`-th (0-based) candidate satisfying `keep`; `n` is below the number that do. */
function nthWhere(
  feasible: readonly Candidate[],
  n: number,
  keep: (candidate: Candidate) => boolean,
): Candidate {
  let seen = 0;
  let last = feasible[0]!;
  for (const candidate of feasible) {
    if (!keep(candidate)) continue;
    if (seen === n) return candidate;
    seen++;
    last = candidate;
  }
  return last;
}

/**
 * 1) closest: the cluster with the lowest d + 2 sigma. The paper binds to "any feasible variant"
 * there; we take the lowest worker index so the choice is reproducible. Equal network figures on
 * two clusters fall to the same rule.
 */
const closest: Policy = (_stream, feasible) => best(feasible, (c) => c.networkMs, 'min');

/**
 * 2) load balancing: argmin L_vn(t), the raw reserved load as the paper writes it (not load over
 * capacity): a large worker carrying 5 queries/s ranks behind a small one carrying 4, however
 * close to full the small one is. Equal loads (idle workers, typically) go to the lowest index.
 */
const loadBalancing: Policy = (_stream, feasible) => best(feasible, (c) => c.load, 'min');

/** 3) farthest: the cluster with the highest (still feasible) d + 2 sigma; then lowest index. */
const farthest: Policy = (_stream, feasible) => best(feasible, (c) => c.networkMs, 'max');

/**
 * 4) cheaper: the paper's text says the expected end-to-end delay 2 (d + 2 sigma) + D_v(zeta) is
 * MAXIMIZED and that the policy improves on farthest by also sparing the fastest variants, while
 * its formula prints argmin, which would make it least impedance (policy 7) a second time. We
 * follow the text: argmax of `expectedMs` over the feasible candidates, so the stream takes the
 * slowest binding that still meets its deadline and leaves the fast ones free.
 */
const cheaper: Policy = (_stream, feasible) => best(feasible, (c) => c.expectedMs, 'max');

/**
 * 5) random-proportional latency: probability proportional to 1 / (2 (d + 2 sigma) + D_v(zeta)),
 * so over many streams the bindings spread in inverse proportion to their delays. A zero expected
 * delay is the limit of the formula and takes all the probability (see `proportional`).
 */
const randomProportionalLatency: Policy = (_stream, feasible, uniform) =>
  proportional(
    feasible,
    uniform,
    () => 1,
    (c) => c.expectedMs,
  );

/**
 * 6) random-proportional load: probability proportional to C_v / L_vn(t), using the worker's whole
 * capacity (C_v times its replicas). As L -> 0 the weight tends to infinity, so when some
 * candidates carry no load the draw is uniform among exactly those (the formula's limit) and the
 * loaded ones are never chosen.
 */
const randomProportionalLoad: Policy = (_stream, feasible, uniform) =>
  proportional(
    feasible,
    uniform,
    (c) => c.worker.capacity,
    (c) => c.load,
  );

/** 7) least impedance: argmin of the expected end-to-end delay; then lowest index. */
const leastImpedance: Policy = (_stream, feasible) => best(feasible, (c) => c.expectedMs, 'min');

/** By name, for configuration and reports. */
const policies: Readonly<Record<PolicyName, Policy>> = {
  closest,
  'load-balancing': loadBalancing,
  farthest,
  cheaper,
  'random-proportional-latency': randomProportionalLatency,
  'random-proportional-load': randomProportionalLoad,
  'least-impedance': leastImpedance,
};

const byIndex: readonly Policy[] = policyNames.map((name) => policies[name]);

/**
 * The policy the DQN's action `index` stands for: actions are numbered in `policyNames` order, so
 * a trained network's output layer keeps its meaning as long as that list does. Throws on an index
 * outside it, which would mean a network trained for a different action set.
 */
function policyAt(index: number): Policy {
  const policy = Number.isInteger(index) ? byIndex[index] : undefined;
  if (policy === undefined) {
    throw new RangeError(`no policy at action index ${index} (0..${byIndex.length - 1})`);
  }
  return policy;
}

/** One call for callers that hold a policy by name (the simulator's static baselines). */
function choose(
  name: PolicyName,
  stream: Stream,
  feasible: readonly Candidate[],
  uniform: () => number,
): Candidate {
  return policies[name](stream, feasible, uniform);
}

export { policies, policyAt, choose };
