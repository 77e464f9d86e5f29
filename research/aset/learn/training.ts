/**
 * ASET training, Algorithm 1 of the paper, on the simulator: episodes on seeds drawn from a pool
 * of P training seeds (line 4), an action every T (line 7) applied to the streams of the next
 * window, the reward of lines 9-10, the episode cut at H or when a window's success ratio falls
 * to theta (line 12), and G gradient steps per episode (lines 13-19, in dqn.ts).
 *
 * Readings and additions where the paper leaves room (docs/aset.md):
 * - Reward: r = -(qF + qR) when 1 - (qF + qR) < phi, else psi. With phi = 1 (our default) the
 *   first branch always applies and r is the window's success ratio minus one: every point of
 *   success counts, which is what the evaluation measures. psi (the paper's term for windows at
 *   or above phi) is kept as an option.
 * - A cut at theta is a real end (terminal: no bootstrap), and it costs -1 for every window left
 *   until H, as if they all failed: otherwise ending early would earn a better return than
 *   playing on with negative rewards — the "short and bad trajectories" the paper's psi is there
 *   to prevent. Reaching H is a time limit, not an end of the task: that transition bootstraps.
 * - Each episode starts from an empty system, warmed up for `warmupMs` under static policies
 *   drawn at random per window (not recorded), so the agent learns on loaded states like those
 *   it meets when deployed.
 * - Checkpoint selection (optional, `validation`): every few episodes the greedy policy plays
 *   whole runs on validation seeds, kept apart from the training and the evaluation seeds, and
 *   the network that scored best is the one returned. The weights at the last episode are one
 *   draw from a noisy process: when the true differences between policies are a point or two,
 *   the last few hundred gradient steps can reorder them. The seven static policies play the
 *   same validation runs, and one that beats the best network there is what gets deployed
 *   (`Deployed`): selection among meta-policies on held-out seeds.
 */
import { DqnAgent } from './dqn.js';
import { greedyAction } from '../../../shared/aset/greedy.js';
import { summarize, windowEnds } from '../sim/episode.js';
import type { ControlledWindow } from '../sim/episode.js';
import type { DqnOptions, EpisodeReport } from './dqn.js';
import type { Scenario } from '../../../shared/aset/scenario.js';
import { createSimulation } from '../sim/simulator.js';
import type { SimulationWindow } from '../../../shared/aset/window.js';
import { encodeState, stateSize } from '../../../shared/aset/state.js';
import { policyNames } from '../../../shared/aset/types.js';
import type { PolicyName } from '../../../shared/aset/types.js';
import { constantLambda, randomLambdaSchedule } from '../sim/workload.js';
import { seededRandom } from '../../../shared/random/index.js';
import type { Network } from '../../../shared/training/network.js';

interface TrainingOptions {
  readonly scenario: Scenario;
  /** M, episodes. */
  readonly episodes: number;
  /** P: training seeds are 1..P (evaluation uses others). */
  readonly trainingSeeds: number;
  /** Seeds the agent (weights, exploration, replay sampling) and the draw of episode seeds. */
  readonly seed: number;
  /** Clients per minute per access point; the paper trains at 60. */
  readonly lambda?: number;
  /**
   * The load of the training episodes: `constant` at `lambda` (the paper: "trained only on
   * episodes with lambda = 60"), or `random`, a random schedule per episode seed
   * (`randomLambdaSchedule`; never one of the evaluation patterns). Validation stays at `lambda`.
   */
  readonly load?: 'constant' | 'random';
  /** T; default 25 s as in the paper. */
  readonly windowMs?: number;
  /** H; default 8 minutes as in the paper. */
  readonly horizonMs?: number;
  readonly warmupMs?: number;
  readonly phi?: number;
  readonly psi?: number;
  /** theta; default 0.1. */
  readonly theta?: number;
  readonly dqn?: Partial<Omit<DqnOptions, 'stateSize' | 'actions' | 'seed'>>;
  /** Checkpoint selection on held-out seeds; default none (the last network is returned). */
  readonly validation?: ValidationOptions;
  /** Called after every episode (progress bar, learning curve). */
  readonly onEpisode?: (result: EpisodeResult) => void;
  /** Called after every validation. */
  readonly onValidation?: (result: ValidationResult) => void;
}

interface ValidationOptions {
  /** Seeds of the validation runs: none of the training seeds 1..P, none the bench uses. */
  readonly seeds: readonly number[];
  /** A validation after every this many episodes, and after the last one. */
  readonly everyEpisodes: number;
  /** Length of a run and its uncounted warm-up, as the bench's runs; default 10 and 2 min. */
  readonly durationMs?: number;
  readonly warmupMs?: number;
}

interface ValidationResult {
  /** Episodes trained when the network was scored. */
  readonly episodes: number;
  /** Successful / counted queries over all validation runs. */
  readonly success: number;
}

/**
 * What to deploy: the best validated network, or a static policy when one scored higher on the
 * same validation runs. Each static policy is a meta-policy too (one that always returns the
 * same action, as the paper puts it), so this is selection among candidates on held-out seeds:
 * a learned switcher that cannot beat the best fixed policy there is not deployed in its place.
 */
type Deployed =
  | { readonly kind: 'network'; readonly episodes: number; readonly success: number }
  | { readonly kind: 'static'; readonly policy: PolicyName; readonly success: number };

interface EpisodeResult extends EpisodeReport {
  /** The training seed the episode ran on. */
  readonly simulationSeed: number;
  /** Windows played (H / T, fewer when cut at theta). */
  readonly windows: number;
  readonly cut: boolean;
  /** Queries of the played windows: success / all. */
  readonly success: number;
  readonly return: number;
}

/** Success ratio of a window, and its qF + qR (an empty window counts as all success). */
function ratios(window: SimulationWindow): { success: number; failed: number } {
  const total = window.success + window.qosFailure + window.rejected;
  if (total === 0) return { success: 1, failed: 0 };
  return { success: window.success / total, failed: (window.qosFailure + window.rejected) / total };
}

/** Lines 9-10. */
function reward(window: SimulationWindow, phi: number, psi: number): number {
  const { failed } = ratios(window);
  return phi > 1 - failed ? -failed : psi;
}

/**
 * Success ratio of a meta-policy (`choose` maps the window just ended to the next policy) on one
 * run per seed: the bench's protocol (a decision every window, the warm-up windows played but not
 * counted), without onnxruntime.
 */
function scoreRuns(
  choose: (previous: SimulationWindow | undefined) => PolicyName,
  scenario: Scenario,
  seeds: readonly number[],
  run: { lambda: number; windowMs: number; durationMs: number; warmupMs: number },
): number {
  const { topology, apps, durationScale } = scenario;
  let success = 0;
  let counted = 0;
  for (const seed of seeds) {
    const simulation = createSimulation({
      topology,
      apps,
      durationScale,
      lambda: constantLambda(run.lambda),
      seed,
    });
    const windows: ControlledWindow[] = [];
    let previous: SimulationWindow | undefined;
    for (const end of windowEnds(run.durationMs, run.windowMs)) {
      const policy = choose(previous);
      simulation.setPolicy(policy);
      simulation.runUntil(end);
      previous = simulation.takeWindow();
      windows.push({ ...previous, policy });
    }
    const { counted: outcomes } = summarize(windows, run.warmupMs);
    success += outcomes.success;
    counted += outcomes.success + outcomes.qosFailure + outcomes.rejected;
  }
  return counted === 0 ? 1 : success / counted;
}

/** scoreRuns for the greedy policy of `network`. */
function scoreGreedy(
  network: Network,
  scenario: Scenario,
  seeds: readonly number[],
  run: { lambda: number; windowMs: number; durationMs: number; warmupMs: number },
): number {
  const state = new Float32Array(stateSize(scenario.topology));
  return scoreRuns(
    (previous) => {
      encodeState(scenario.topology, previous, state);
      return policyNames[greedyAction(network.logits(state))]!;
    },
    scenario,
    seeds,
    run,
  );
}

function checkValidation(validation: ValidationOptions | undefined, trainingSeeds: number): void {
  if (validation === undefined) return;
  if (validation.seeds.length === 0) throw new RangeError('validation needs at least one seed');
  if (validation.seeds.some((s) => s >= 1 && s <= trainingSeeds)) {
    throw new RangeError(`validation seeds must not be training seeds 1..${trainingSeeds}`);
  }
  if (!Number.isInteger(validation.everyEpisodes) || validation.everyEpisodes < 1) {
    throw new RangeError('validation.everyEpisodes must be an integer >= 1');
  }
}

/** What every episode is played with: the settings resolved once, the agent and the draws. */
interface EpisodeContext {
  options: TrainingOptions;
  agent: DqnAgent;
  draw: () => number;
  windowMs: number;
  horizon: number;
  warmupWindows: number;
  phi: number;
  psi: number;
  theta: number;
  /** The state buffers, swapped as each window's next state becomes the current one. */
  buffers: { state: Float32Array; next: Float32Array };
}

/** A new simulation on a drawn training seed, warmed up under random policies. */
function startEpisode(context: EpisodeContext) {
  const { options, draw, windowMs } = context;
  const { topology, apps, durationScale } = options.scenario;
  const simulationSeed = 1 + Math.floor(draw() * options.trainingSeeds);
  const simulation = createSimulation({
    topology,
    apps,
    durationScale,
    lambda:
      options.load === 'random'
        ? randomLambdaSchedule(simulationSeed)
        : constantLambda(options.lambda ?? 60),
    seed: simulationSeed,
  });
  let at = 0;
  let previous: SimulationWindow | undefined;
  for (let w = 0; w < context.warmupWindows; w += 1) {
    simulation.setPolicy(policyNames[Math.floor(draw() * policyNames.length)]!);
    at += windowMs;
    simulation.runUntil(at);
    previous = simulation.takeWindow();
  }
  return { simulationSeed, simulation, at, previous };
}

/** One episode of Algorithm 1: act, observe, remember, until the horizon or a cut at theta. */
function playEpisode(context: EpisodeContext): EpisodeResult {
  const { options, agent, buffers, windowMs, horizon } = context;
  const { topology } = options.scenario;
  const start = startEpisode(context);
  const { simulation } = start;
  let { at } = start;
  encodeState(topology, start.previous, buffers.state);
  let played = 0;
  let succeeded = 0;
  let offered = 0;
  let total = 0;
  let cut = false;
  for (let t = 0; t < horizon; t += 1) {
    const action = agent.act(buffers.state);
    simulation.setPolicy(policyNames[action]!);
    at += windowMs;
    simulation.runUntil(at);
    const window = simulation.takeWindow();
    encodeState(topology, window, buffers.next);
    played += 1;
    succeeded += window.success;
    offered += window.success + window.qosFailure + window.rejected;
    cut = ratios(window).success <= context.theta;
    const r = reward(window, context.phi, context.psi) - (cut ? horizon - 1 - t : 0);
    total += r;
    agent.remember(buffers.state, action, r, buffers.next, cut);
    [buffers.state, buffers.next] = [buffers.next, buffers.state];
    if (cut) break;
  }
  const report = agent.finishEpisode();
  return {
    ...report,
    simulationSeed: start.simulationSeed,
    windows: played,
    cut,
    success: offered === 0 ? 1 : succeeded / offered,
    return: total,
  };
}

/** The validation runs' settings for one spec. */
const validationRun = (options: TrainingOptions, windowMs: number, spec: ValidationOptions) => ({
  lambda: options.lambda ?? 60,
  windowMs,
  durationMs: spec.durationMs ?? 10 * 60_000,
  warmupMs: spec.warmupMs ?? 2 * 60_000,
});

/** Scores checkpoints on the validation runs and keeps the best network. */
function createValidator(options: TrainingOptions, agent: DqnAgent, windowMs: number) {
  const validations: ValidationResult[] = [];
  let best: { network: Network; result: ValidationResult } | undefined;
  return {
    validations,
    best: () => best,
    validate(spec: ValidationOptions, episodes: number) {
      const run = validationRun(options, windowMs, spec);
      const success = scoreGreedy(agent.network, options.scenario, spec.seeds, run);
      const result = { episodes, success };
      validations.push(result);
      options.onValidation?.(result);
      // Strictly better: on a tie the earlier network stays.
      if (best === undefined || success > best.result.success) {
        best = { network: agent.network.clone(), result };
      }
    },
  };
}

/** The candidate to deploy: the best checkpoint, unless a static policy scored strictly better. */
function chooseDeployed(
  best: ValidationResult | undefined,
  statics: ReadonlyArray<{ policy: PolicyName; success: number }>,
): Deployed | undefined {
  let deployed: Deployed | undefined =
    best === undefined ? undefined : { kind: 'network', ...best };
  for (const { policy, success } of statics) {
    // Strictly better, as between checkpoints: a tie keeps the network.
    if (deployed === undefined || success > deployed.success) {
      deployed = { kind: 'static', policy, success };
    }
  }
  return deployed;
}

function episodeContext(
  options: TrainingOptions,
  agent: DqnAgent,
  windowMs: number,
  size: number,
): EpisodeContext {
  return {
    options,
    agent,
    draw: seededRandom(options.seed ^ 0x5eed),
    windowMs,
    horizon: Math.round((options.horizonMs ?? 8 * 60_000) / windowMs),
    warmupWindows: Math.round((options.warmupMs ?? 120_000) / windowMs),
    phi: options.phi ?? 1,
    psi: options.psi ?? 0,
    theta: options.theta ?? 0.1,
    buffers: { state: new Float32Array(size), next: new Float32Array(size) },
  };
}

/** Each static policy on the validation runs, in `policyNames` order. */
function scoreStatics(options: TrainingOptions, windowMs: number, validation: ValidationOptions) {
  return policyNames.map((policy) => ({
    policy,
    success: scoreRuns(
      () => policy,
      options.scenario,
      validation.seeds,
      validationRun(options, windowMs, validation),
    ),
  }));
}

function trainAset(options: TrainingOptions): {
  agent: DqnAgent;
  episodes: EpisodeResult[];
  /** The network to deploy: the best validated one, or the last when there is no validation. */
  network: Network;
  validations: ValidationResult[];
  /** The validation `network` scored (the first of the best); none without validation. */
  selected: ValidationResult | undefined;
  /** Each static policy on the validation runs, in `policyNames` order; none without validation. */
  staticValidations: ReadonlyArray<{ policy: PolicyName; success: number }>;
  /** The candidate that scored best on validation; none without validation. */
  deployed: Deployed | undefined;
} {
  const windowMs = options.windowMs ?? 25_000;
  const size = stateSize(options.scenario.topology);
  const agent = new DqnAgent({
    gamma: 0.9,
    ...options.dqn,
    stateSize: size,
    actions: policyNames.length,
    seed: options.seed,
  });
  const context = episodeContext(options, agent, windowMs, size);
  const { validation } = options;
  checkValidation(validation, options.trainingSeeds);
  const validator = createValidator(options, agent, windowMs);
  const results: EpisodeResult[] = [];
  for (let k = 0; k < options.episodes; k += 1) {
    const result = playEpisode(context);
    results.push(result);
    options.onEpisode?.(result);
    const trained = k + 1;
    if (
      validation !== undefined &&
      (trained % validation.everyEpisodes === 0 || trained === options.episodes)
    ) {
      validator.validate(validation, trained);
    }
  }
  const staticValidations =
    validation === undefined ? [] : scoreStatics(options, windowMs, validation);
  const best = validator.best();
  return {
    agent,
    episodes: results,
    network: best?.network ?? agent.network,
    validations: validator.validations,
    selected: best?.result,
    staticValidations,
    deployed: chooseDeployed(best?.result, staticValidations),
  };
}

export { trainAset, reward, scoreGreedy, scoreRuns };
export type { TrainingOptions, EpisodeResult, ValidationOptions, ValidationResult, Deployed };
