/**
 * One simulation of the aset-sim bench as plain, structured-cloneable data, so the same job runs
 * in a worker thread or in the main thread and gives the same numbers (everything is seeded).
 */
import { existsSync } from 'node:fs';
import { runControlled, staticController } from '../../aset/sim/episode.js';
import type { ControlledWindow } from '../../aset/sim/episode.js';
import type { WindowController } from '../../../shared/aset/window.js';
import { runGreedyOracle } from '../../aset/sim/oracle.js';
import { thresholdRule } from '../../aset/sim/threshold-rule.js';
import { loadScenario } from '../../../shared/aset/scenario.js';
import type { Scenario } from '../../../shared/aset/scenario.js';
import type { SimulationOptions } from '../../aset/sim/simulator.js';
import type { Outcomes } from '../../../shared/aset/window.js';
import type { PolicyName } from '../../../shared/aset/types.js';
import {
  constantLambda,
  fallingLambdaPattern,
  randomLambdaSchedule,
  burstLambdaPattern,
} from '../../aset/sim/workload.js';
import type { LambdaSchedule } from '../../aset/sim/workload.js';

/** The paper's three scenarios (section V-A), from the most central to the most distributed. */
const topologyNames = ['dc-cloud', 'co-dc-cloud', 'full-edge'] as const;
type TopologyName = (typeof topologyNames)[number];

/**
 * The paper's loads: a constant lambda, or one of the two dynamic patterns of figure 7; or a
 * random schedule drawn from the run's seed (`randomLambdaSchedule`), which is not the paper's
 * and never one of its evaluation patterns.
 */
type Load =
  | { kind: 'constant'; lambda: number }
  | { kind: 'pattern'; name: 'burst' | 'falling' }
  | { kind: 'random' };

/**
 * Who picks the policy: a static policy, the greedy oracle, a fixed cycle of policies, one per
 * window (a state-blind mixture: if none beats the best static policy, a meta-policy can only win
 * by reading the state), or the hand-written load-threshold rule (`thresholdRule`: least
 * impedance below edge utilisation x, farthest above). ASET runs in the main thread.
 */
type Runner =
  | { kind: 'static'; policy: PolicyName }
  | { kind: 'oracle'; lookaheadWindows: number }
  | { kind: 'cycle'; policies: readonly PolicyName[] }
  | { kind: 'threshold'; x: number };

/** One seed-run: everything a thread needs to reproduce it exactly. */
interface SimJob {
  readonly topology: TopologyName;
  readonly seed: number;
  readonly load: Load;
  readonly durationMs: number;
  readonly warmupMs: number;
  readonly runner: Runner;
}

/** A run's outcome without the per-window samples, small enough to post between threads. */
interface JobResult {
  readonly windows: ControlledWindow[];
  readonly counted: Outcomes;
  readonly policyShare: Record<PolicyName, number>;
  readonly wallMs: number;
  /** Simulated time the job cost (the oracle's replays included). */
  readonly simulatedMs: number;
  /** Static, cycle and threshold runs: QoS failures over the whole run that were network-late. */
  readonly networkLate?: number;
  /** Static, cycle and threshold runs: queries sent over the whole run (resolved or in flight at its end). */
  readonly sent?: number;
}

/** Walks up from this file to the checkout, so the bench works from dist/ and from sources. */
function repoRoot(): URL {
  let dir = new URL('./', import.meta.url);
  for (;;) {
    if (existsSync(new URL('package.json', dir)) && existsSync(new URL('data/aset/', dir))) {
      return dir;
    }
    const parent = new URL('../', dir);
    if (parent.href === dir.href)
      throw new Error('no package.json with data/aset/ above the bench');
    dir = parent;
  }
}

const scenarios = new Map<TopologyName, Promise<Scenario>>();

/** Each thread parses a topology once, however many jobs it runs on it. */
function scenarioFor(topology: TopologyName): Promise<Scenario> {
  let scenario = scenarios.get(topology);
  if (scenario === undefined) {
    scenario = loadScenario(new URL('data/aset/', repoRoot()), topology);
    scenarios.set(topology, scenario);
  }
  return scenario;
}

function scheduleOf(load: Load, seed: number): LambdaSchedule {
  if (load.kind === 'constant') return constantLambda(load.lambda);
  if (load.kind === 'random') return randomLambdaSchedule(seed);
  return load.name === 'burst' ? burstLambdaPattern : fallingLambdaPattern;
}

/** The simulator options of a job: the same seed gives every runner the same workload. */
async function optionsFor(
  job: Pick<SimJob, 'topology' | 'seed' | 'load'>,
): Promise<SimulationOptions> {
  const { apps, topology, durationScale } = await scenarioFor(job.topology);
  return { topology, apps, durationScale, lambda: scheduleOf(job.load, job.seed), seed: job.seed };
}

/** The window controller of a static, cycle or threshold runner. */
function controllerFor(
  runner: Exclude<Runner, { kind: 'oracle' }>,
  topology: SimulationOptions['topology'],
): WindowController {
  if (runner.kind === 'static') return staticController(runner.policy);
  if (runner.kind === 'threshold') return thresholdRule(topology, runner.x);
  const { policies } = runner;
  if (policies.length === 0) throw new RangeError('a cycle needs at least one policy');
  let next = 0;
  return { name: policies.join('+'), choose: () => policies[next++ % policies.length]! };
}

/**
 * Runs a static or oracle job through the same loop and counting as ASET, timing only the
 * simulation (not the scenario parsing) so the speed figure is the simulator's.
 */
async function runSimJob(job: SimJob): Promise<JobResult> {
  const options = await optionsFor(job);
  const spec = { durationMs: job.durationMs, warmupMs: job.warmupMs };
  const started = performance.now();
  if (job.runner.kind === 'oracle') {
    const run = runGreedyOracle(options, spec, { lookaheadWindows: job.runner.lookaheadWindows });
    return {
      windows: run.windows.map(({ trialSuccess: _trials, ...window }) => window),
      counted: run.counted,
      policyShare: run.policyShare,
      wallMs: performance.now() - started,
      simulatedMs: run.simulatedMs,
    };
  }
  const { totals, ...run } = await runControlled(
    options,
    controllerFor(job.runner, options.topology),
    spec,
  );
  return {
    ...run,
    wallMs: performance.now() - started,
    simulatedMs: job.durationMs,
    networkLate: totals.networkLate,
    sent: totals.success + totals.qosFailure + totals.rejected + totals.inFlight,
  };
}

export { topologyNames, repoRoot, scenarioFor, optionsFor, runSimJob };
export type { TopologyName, Load, Runner, SimJob, JobResult };
