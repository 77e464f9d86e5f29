/**
 * One condition's run, resumable: federated rounds until the global model's test accuracy
 * reaches the target (and at least `minRounds` have run, for a fixed-budget comparison), or the
 * round cap, or training diverges. `advance` may be called again with a later cap and continues
 * where the run stopped: the rounds are deterministic, so a learning-rate race's winner,
 * continued, is the full run a fresh start would give. The global model is evaluated after round
 * 0, every `evalEvery`-th round and rounds `minRounds` and `maxRounds`, so rounds to the target
 * are resolved to `evalEvery` rounds and a run stops only on an evaluated round.
 */
import type { Evaluation } from '../../shared/fl/local-train.js';
import type { CurvePoint } from './curves.js';
import { federatedRounds } from './simulate.js';
import type { Algorithm, Federation, RoundOutcome, TrainRound } from './simulate.js';

interface StopRule {
  /** Test accuracy to reach, in [0, 1]. */
  readonly target: number;
  /** Rounds run at most (counted from round 1, not from this advance). */
  readonly maxRounds: number;
  /** Rounds run at least, even past the target (0: stop at the target). */
  readonly minRounds: number;
  /** Evaluate after every this many rounds (1: every round). */
  readonly evalEvery: number;
}

interface RunDeps {
  readonly train: TrainRound;
  /** The global model's (ONNX bytes) test accuracy and loss. */
  readonly evaluate: (model: Uint8Array) => Promise<Evaluation>;
  /** Called after each evaluation (progress). */
  readonly onPoint?: (point: CurvePoint) => void;
}

/** A run's state between advances. */
interface ConditionRun {
  /** Round 0 (the initial model) and every evaluated round, in order. */
  readonly curve: readonly CurvePoint[];
  /** Rounds completed. */
  readonly rounds: number;
  /** The round whose training diverged (non-finite weights); the run cannot advance after it. */
  readonly divergedAt: number | undefined;
  /** Milliseconds spent in rounds and evaluations so far. */
  readonly ms: number;
  /** Runs rounds until `stop` says to stop (at once if it already does). */
  advance(stop: StopRule): Promise<void>;
  /** Releases the run (ends its round generator). */
  close(): Promise<void>;
}

/** Starts a run of `algorithm` on `federation`: evaluates the initial model as round 0. */
async function startRun(
  federation: Federation,
  algorithm: Algorithm,
  deps: RunDeps,
): Promise<ConditionRun> {
  const rounds: AsyncGenerator<RoundOutcome, void, undefined> = federatedRounds(
    federation,
    algorithm,
    deps.train,
  );
  const curve: CurvePoint[] = [];
  let done = 0;
  let divergedAt: number | undefined;
  let ms = 0;
  const evaluate = async (round: number, model: Uint8Array) => {
    const { accuracy, loss } = await deps.evaluate(model);
    const point = { round, accuracy, loss };
    curve.push(point);
    deps.onPoint?.(point);
  };
  const timed = async (work: () => Promise<void>) => {
    const started = performance.now();
    try {
      await work();
    } finally {
      ms += performance.now() - started;
    }
  };
  await timed(() => evaluate(0, federation.initialModel));
  const reached = (target: number) => curve.some((p) => p.accuracy >= target);
  const stopped = (stop: StopRule) =>
    divergedAt !== undefined ||
    done >= stop.maxRounds ||
    (done >= stop.minRounds && reached(stop.target));
  return {
    curve,
    get rounds() {
      return done;
    },
    get divergedAt() {
      return divergedAt;
    },
    get ms() {
      return ms;
    },
    advance: (stop) =>
      timed(async () => {
        while (!stopped(stop)) {
          const next = await rounds.next();
          if (next.done === true) return;
          const outcome = next.value;
          if (outcome.kind === 'diverged') {
            divergedAt = outcome.round;
            return;
          }
          done = outcome.round;
          // Every round the run can stop at is evaluated: the target is only seen on a point.
          if (done % stop.evalEvery === 0 || done === stop.maxRounds || done === stop.minRounds) {
            await evaluate(done, outcome.model);
          }
        }
      }),
    close: async () => {
      await rounds.return(undefined);
    },
  };
}

export { startRun };
export type { StopRule, RunDeps, ConditionRun };
