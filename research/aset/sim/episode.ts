/**
 * The window-control loop of the ASET paper (section IV): every T seconds a controller picks one
 * of the seven static policies, and that policy binds every stream arriving in [t, t + T]. The
 * benchmark, the DQN training and the aset-scheduler function all drive the simulator through
 * this one loop, so a static baseline, the trained agent and the hindsight oracle are measured
 * with exactly the same window boundaries and counting rules.
 */
import { createSimulation } from './simulator.js';
import type { SimulationOptions } from './simulator.js';
import type { Totals } from './simulation-outcomes.js';
import type { Outcomes, SimulationWindow, WindowController } from '../../../shared/aset/window.js';
import { policyNames } from '../../../shared/aset/types.js';
import type { PolicyName } from '../../../shared/aset/types.js';

/** The paper's T (section V-B: "we sample the state using a time window T = 25 seconds"). */
const defaultWindowMs = 25_000;

/**
 * A static policy as a controller, so baselines run through the same loop (and the same window
 * accounting) as ASET instead of a separate code path whose numbers could drift.
 */
function staticController(name: PolicyName): WindowController {
  if (!policyNames.includes(name)) throw new RangeError(`unknown policy ${String(name)}`);
  return { name, choose: () => name };
}

/** One window of a controlled run: what was chosen for it and what was counted in it. */
interface ControlledWindow extends Outcomes {
  readonly startMs: number;
  readonly endMs: number;
  readonly policy: PolicyName;
}

/** A controlled run: per-window record for time-series plots, and the warm-up-free totals. */
interface ControlledRun {
  readonly windows: ControlledWindow[];
  /** Totals over the windows that start at or after `warmupMs`. */
  readonly counted: Outcomes;
  /** Fraction of the counted windows each policy was chosen for (sums to 1 when any counted). */
  readonly policyShare: Record<PolicyName, number>;
}

/** A controlled run with the simulation's own totals at its end (the warm-up included). */
interface ControlledRunTotals extends ControlledRun {
  readonly totals: Totals;
}

/** How long to run and how to cut the run into decision windows. */
interface ControlledRunSpec {
  readonly durationMs: number;
  /** Length of a decision window; default 25,000 ms, the paper's T. */
  readonly windowMs?: number;
  /**
   * Windows starting before this are run but not counted: the system starts empty, and its first
   * minutes (no long streams bound yet) say little about steady-state scheduling. Default 0.
   */
  readonly warmupMs?: number;
}

/** Checks a run spec once, so a typo'd duration fails loudly rather than running zero windows. */
function checkSpec(run: ControlledRunSpec): { windowMs: number; warmupMs: number } {
  const windowMs = run.windowMs ?? defaultWindowMs;
  const warmupMs = run.warmupMs ?? 0;
  if (!(run.durationMs > 0) || !Number.isFinite(run.durationMs)) {
    throw new RangeError('durationMs must be positive and finite');
  }
  if (!(windowMs > 0) || !Number.isFinite(windowMs)) {
    throw new RangeError('windowMs must be positive and finite');
  }
  if (!(warmupMs >= 0)) throw new RangeError('warmupMs must be >= 0');
  return { windowMs, warmupMs };
}

/** Window ends for a run: multiples of T, the last one cut at the run's end. */
function windowEnds(durationMs: number, windowMs: number): number[] {
  const ends: number[] = [];
  for (let end = windowMs; ; end += windowMs) {
    ends.push(Math.min(end, durationMs));
    if (end >= durationMs) return ends;
  }
}

/** Totals and policy shares over the windows at/after the warm-up. */
function summarize(windows: ControlledWindow[], warmupMs: number): ControlledRun {
  const counted: Outcomes = { success: 0, qosFailure: 0, rejected: 0 };
  const share = Object.fromEntries(policyNames.map((p) => [p, 0])) as Record<PolicyName, number>;
  let n = 0;
  for (const w of windows) {
    if (w.startMs < warmupMs) continue;
    counted.success += w.success;
    counted.qosFailure += w.qosFailure;
    counted.rejected += w.rejected;
    share[w.policy] += 1;
    n += 1;
  }
  if (n > 0) for (const p of policyNames) share[p] /= n;
  return { windows, counted, policyShare: share };
}

/**
 * Runs one simulation under `controller`: before each window the controller sees the window that
 * just ended and names the policy for the next one; that policy binds the streams arriving in the
 * window (streams bound earlier keep their workers, as in the paper).
 */
async function runControlled(
  options: SimulationOptions,
  controller: WindowController,
  run: ControlledRunSpec,
): Promise<ControlledRunTotals> {
  const { windowMs, warmupMs } = checkSpec(run);
  const simulation = createSimulation(options);
  const windows: ControlledWindow[] = [];
  let previous: SimulationWindow | undefined;
  for (const end of windowEnds(run.durationMs, windowMs)) {
    const policy = await controller.choose(previous);
    simulation.setPolicy(policy);
    simulation.runUntil(end);
    previous = simulation.takeWindow();
    windows.push({
      startMs: previous.startMs,
      endMs: previous.endMs,
      policy,
      success: previous.success,
      qosFailure: previous.qosFailure,
      rejected: previous.rejected,
    });
  }
  return { ...summarize(windows, warmupMs), totals: simulation.totals() };
}

export { defaultWindowMs, staticController, runControlled, checkSpec, windowEnds, summarize };
export type { ControlledWindow, ControlledRun, ControlledRunTotals, ControlledRunSpec };
