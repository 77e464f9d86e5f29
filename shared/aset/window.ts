/**
 * What a meta-policy sees and answers every T, shared by the live scheduler (scheduler.ts) and
 * the simulator (research/aset/sim/): the window that just ended, and the controller that picks
 * the policy for the next one. It lives here, not in research/, so the serving path never imports
 * the simulator.
 */
import type { Observation } from './observation.js';
import type { PolicyName } from './types.js';

/** Query counts by outcome. */
interface Outcomes {
  success: number;
  qosFailure: number;
  rejected: number;
}

/** What happened between two window boundaries. */
interface SimulationWindow extends Outcomes {
  readonly startMs: number;
  readonly endMs: number;
  /** The policy in force when the window was taken (the one chosen for it, in a controlled run). */
  readonly policy: PolicyName;
  /** Samples taken in (startMs, endMs], oldest first. */
  readonly samples: readonly Observation[];
}

/**
 * Anything that picks the policy for the next window: a static baseline, the trained DQN
 * (aset-controller.ts) or a scripted test double. May be async because the DQN runs in
 * onnxruntime.
 */
interface WindowController {
  readonly name: string;
  /** Policy for the next window of T, from the window that just ended (undefined before the first window). */
  choose(previous: SimulationWindow | undefined): PolicyName | Promise<PolicyName>;
}

export type { Outcomes, SimulationWindow, WindowController };
