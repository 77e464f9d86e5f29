/**
 * Hindsight references for the ASET benchmark ("beyond the paper"): how much a per-window policy
 * switcher could gain over the static policies on a given workload, so a reader can tell whether
 * ASET's margin (or its absence) reflects the agent or the topology.
 *
 * The greedy oracle, window by window: from the exact simulator state the chosen prefix leads to,
 * try each of the seven static policies for the next window of T, keep the one with the most
 * successful queries IN THAT WINDOW, and move on from the state that choice produced. "The same
 * state" is a fork of the realized simulation (`Simulation.fork`): a copy of its whole state,
 * every random stream included, which runs bit-for-bit as the realized run would. Each candidate
 * is tried on its own fork of the state at the window's start, and the realized path continues
 * from the winner's fork as it stood after its first window, so the reported outcomes are those
 * of an actual run of the chosen policy sequence. (Forking is exact: an earlier version rebuilt
 * each state by replaying the chosen prefix from t = 0, O(W^2) windows a run, and gave the same
 * results.) A run costs candidates x (1 + lookahead) windows per window, plus the forks' copies.
 *
 * What this is NOT:
 * - Not an upper bound. It is myopic: a window's success is mostly earned by streams bound in
 *   earlier windows, while the streams a policy binds now keep their workers (and the reserved
 *   load) for their whole duration, often many windows. A choice that wins its own window can
 *   crowd out later streams, so a smarter (non-greedy) schedule, ASET included, may beat it, and
 *   on some seeds it can even lose to the best static policy. `lookaheadWindows` scores each
 *   candidate over more windows to soften this, at a cost; it is still not an optimum.
 * - Not causal. It sees the outcome of each window before choosing it, including the noise draws:
 *   the network and processing normals come from seeded streams consumed in event order, so
 *   different policies consume them differently (workload arrivals, which have streams of their
 *   own, are identical across policies; the noise is statistically the same but not coupled
 *   draw-for-draw). The max over seven trials therefore also picks favourable noise, a small
 *   optimistic bias no real controller can have.
 *
 * `bestStaticInHindsight` is the other, trivial reference: the static policy that did best over a
 * whole seed-run, picked after the fact.
 *
 * `deviationTrials` asks what a controller could learn, rather than what hindsight could pick:
 * along the path of one base policy, at chosen windows, it plays each candidate for that one
 * window and the base policy again after it, and records the state the decision was taken in
 * (what ASET sees) with each candidate's success over the following windows. Whether those
 * gains can be predicted from the state is the question a meta-policy's margin rests on.
 */
import { checkSpec, defaultWindowMs, summarize, windowEnds } from './episode.js';
import type { ControlledRun, ControlledRunSpec, ControlledWindow } from './episode.js';
import { createSimulation } from './simulator.js';
import type { Simulation, SimulationOptions } from './simulator.js';
import type { Outcomes } from '../../../shared/aset/window.js';
import { encodeState } from '../../../shared/aset/state.js';
import { policyNames } from '../../../shared/aset/types.js';
import type { PolicyName } from '../../../shared/aset/types.js';

/** Knobs of the oracle; the defaults are the greedy oracle the bench reports. */
interface OracleOptions {
  /** Policies tried per window; default all seven, in `policyNames` order (the tie-break order). */
  readonly candidates?: readonly PolicyName[];
  /**
   * Extra windows each trial is scored over, holding the candidate policy (default 0: the
   * window's own success only, the greedy definition). Costs about (1 + n) times the trials.
   */
  readonly lookaheadWindows?: number;
}

/** One realized oracle window, with what every candidate scored, for analysis and tests. */
interface OracleWindow extends ControlledWindow {
  /** Success count each candidate reached on its scoring horizon, from this window's state. */
  readonly trialSuccess: Readonly<Partial<Record<PolicyName, number>>>;
}

/** A realized oracle run, comparable field for field with `runControlled`'s result. */
interface OracleRun extends ControlledRun {
  readonly windows: OracleWindow[];
  /**
   * Simulated milliseconds spent, so callers can report the oracle's cost: the sum of every
   * trial's horizon (each candidate, from the window's start to its horizon's end). The realized
   * path adds nothing (it is the winners' first windows) and forks copy state, simulating nothing.
   */
  readonly simulatedMs: number;
}

/** A candidate's trial from one window's state, and what the realized path needs of it. */
interface Trial {
  readonly success: number;
  /** Outcomes of the trial's first window (the deciding one). */
  readonly first: Outcomes;
  /** The trial's simulation as it stood after its first window. */
  readonly after: Simulation;
}

/**
 * Plays `policy` on `simulation` (which it consumes) over `horizon`, window ends from the
 * deciding window's on, and sums its successes.
 */
function playTrial(simulation: Simulation, policy: PolicyName, horizon: readonly number[]): Trial {
  simulation.setPolicy(policy);
  let success = 0;
  let first: Outcomes | undefined;
  let after = simulation;
  for (const end of horizon) {
    simulation.runUntil(end);
    const window = simulation.takeWindow();
    if (first === undefined) {
      first = window;
      // Later windows move the trial on: keep the state the realized path would continue from.
      if (horizon.length > 1) after = simulation.fork();
    }
    success += window.success;
  }
  return { success, first: first!, after };
}

/**
 * The greedy per-window hindsight oracle described in the module comment. Ties go to the
 * earliest candidate in `candidates` order, so a run is deterministic for its options.
 */
function runGreedyOracle(
  options: SimulationOptions,
  run: ControlledRunSpec,
  oracle: OracleOptions = {},
): OracleRun {
  const { windowMs, warmupMs } = checkSpec(run);
  const candidates = oracle.candidates ?? policyNames;
  const lookahead = oracle.lookaheadWindows ?? 0;
  if (candidates.length === 0) throw new RangeError('the oracle needs at least one candidate');
  if (!Number.isInteger(lookahead) || lookahead < 0) {
    throw new RangeError('lookaheadWindows must be an integer >= 0');
  }
  const ends = windowEnds(run.durationMs, windowMs);
  const windows: OracleWindow[] = [];
  let simulatedMs = 0;

  // The realized simulation, standing at the start of window k.
  let realized = createSimulation(options);
  for (let k = 0; k < ends.length; k += 1) {
    const startMs = k > 0 ? ends[k - 1]! : 0;
    const horizon = ends.slice(k, k + 1 + lookahead);
    let best: { policy: PolicyName; trial: Trial } | undefined;
    const trialSuccess: Partial<Record<PolicyName, number>> = {};
    for (const [i, policy] of candidates.entries()) {
      // The last candidate may take the realized state itself: nothing needs it afterwards.
      const from = i === candidates.length - 1 ? realized : realized.fork();
      const trial = playTrial(from, policy, horizon);
      simulatedMs += horizon[horizon.length - 1]! - startMs;
      trialSuccess[policy] = trial.success;
      if (best === undefined || trial.success > best.trial.success) best = { policy, trial };
    }
    const { policy, trial } = best!;
    realized = trial.after;
    windows.push({
      startMs,
      endMs: ends[k]!,
      policy,
      success: trial.first.success,
      qosFailure: trial.first.qosFailure,
      rejected: trial.first.rejected,
      trialSuccess,
    });
  }
  const summary = summarize(windows, warmupMs);
  return { windows, counted: summary.counted, policyShare: summary.policyShare, simulatedMs };
}

/**
 * The static policy with the most counted successes on one seed-run (ties: `policyNames` order):
 * the reference "had we known which policy suits this workload", which any adaptive scheduler
 * should be compared against before claiming a gain.
 */
function bestStaticInHindsight(runs: Readonly<Partial<Record<PolicyName, ControlledRun>>>): {
  policy: PolicyName;
  counted: Outcomes;
} {
  let best: { policy: PolicyName; counted: Outcomes } | undefined;
  for (const policy of policyNames) {
    const run = runs[policy];
    if (run === undefined) continue;
    if (best === undefined || run.counted.success > best.counted.success) {
      best = { policy, counted: run.counted };
    }
  }
  if (best === undefined) throw new RangeError('no static runs to choose from');
  return best;
}

/** Where `deviationTrials` deviates from the base path, and how long it scores each deviation. */
interface DeviationSpec {
  /** The policy of every window but the deviating one. */
  readonly base: PolicyName;
  /**
   * Window indices (0-based) at which to deviate. At 0 the system is empty and the controller has
   * no previous window: its state is the empty encoding, as `encodeState(topology, undefined)`.
   */
  readonly decisions: readonly number[];
  /** Windows each trial is scored over, the deviating one first. */
  readonly horizonWindows: number;
  /** Default 25,000 ms, the paper's T. */
  readonly windowMs?: number;
  /** Default all seven. */
  readonly candidates?: readonly PolicyName[];
}

/** One decision point of the base path and what each candidate would have made of it. */
interface DeviationTrial {
  readonly window: number;
  /** ASET's state at the decision: the encoding of the base path's previous window. */
  readonly state: Float32Array;
  /** Successful queries over the horizon with the candidate in the deciding window. */
  readonly success: Readonly<Partial<Record<PolicyName, number>>>;
  /** Queries counted (success, QoS failure, rejection) over the horizon, per candidate. */
  readonly counted: Readonly<Partial<Record<PolicyName, number>>>;
}

/**
 * The one-window deviations from `spec.base` described in the module comment: the labels of a
 * supervised "which policy should this state get" problem, with every candidate's outcome known.
 * One simulation follows the base path; at each decision every candidate plays on a fork of it,
 * so a call costs the base path up to the last decision plus candidates x horizon windows per
 * decision. The hindsight caveat of the greedy oracle applies: candidates consume the noise
 * streams differently, so part of a trial's difference is noise no state can predict.
 */
function deviationTrials(options: SimulationOptions, spec: DeviationSpec): DeviationTrial[] {
  const windowMs = spec.windowMs ?? defaultWindowMs;
  const candidates = spec.candidates ?? policyNames;
  if (!Number.isInteger(spec.horizonWindows) || spec.horizonWindows < 1) {
    throw new RangeError('horizonWindows must be an integer >= 1');
  }
  if (spec.decisions.some((k) => !Number.isInteger(k) || k < 0)) {
    throw new RangeError('decisions must be window indices >= 0');
  }
  if (candidates.length === 0) throw new RangeError('deviationTrials needs a candidate');
  const base = createSimulation(options);
  base.setPolicy(spec.base);
  // The base path's state at window 0, then after each window it has run.
  let state = encodeState(options.topology, undefined);
  let done = 0;
  const trials = new Map<number, DeviationTrial>();
  const order = [...new Set(spec.decisions)].sort((a, b) => a - b);
  for (const k of order) {
    for (; done < k; done += 1) {
      base.runUntil((done + 1) * windowMs);
      state = encodeState(options.topology, base.takeWindow());
    }
    const success: Partial<Record<PolicyName, number>> = {};
    const counted: Partial<Record<PolicyName, number>> = {};
    for (const [i, candidate] of candidates.entries()) {
      // The last trial of the last decision may run on the base path itself.
      const last = k === order[order.length - 1] && i === candidates.length - 1;
      const simulation = last ? base : base.fork();
      let won = 0;
      let all = 0;
      for (let j = k; j < k + spec.horizonWindows; j += 1) {
        simulation.setPolicy(j === k ? candidate : spec.base);
        simulation.runUntil((j + 1) * windowMs);
        const window = simulation.takeWindow();
        won += window.success;
        all += window.success + window.qosFailure + window.rejected;
      }
      success[candidate] = won;
      counted[candidate] = all;
    }
    trials.set(k, { window: k, state, success, counted });
  }
  // A decision listed twice gets a copy of its own, as if computed twice.
  const used = new Set<number>();
  return spec.decisions.map((k) => {
    const trial = trials.get(k)!;
    if (!used.has(k)) {
      used.add(k);
      return trial;
    }
    return {
      window: k,
      state: trial.state.slice(),
      success: { ...trial.success },
      counted: { ...trial.counted },
    };
  });
}

export { runGreedyOracle, bestStaticInHindsight, deviationTrials };
export type { OracleOptions, OracleWindow, OracleRun, DeviationSpec, DeviationTrial };
