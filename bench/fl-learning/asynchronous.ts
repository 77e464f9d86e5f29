/**
 * FedBuff (Nguyen et al. 2022) against synchronous rounds on a simulated clock, through
 * shared/fl/strategy/fedbuff.ts (checkStaleness, modelDelta, bufferedStep with stalenessWeight).
 *
 * Trainers are slow or fast: client i needs `speed(i)` time units per local training, the speeds
 * spread evenly from 1 to `slowest` over a seeded shuffle of the clients. Communication and the
 * server's work take no simulated time.
 *
 * - Synchronous: round r's trainers (the aggregator's selection) all train from the same model
 *   and the round ends when its slowest has answered (the job's quorum is every selected trainer),
 *   so round r lasts max(speed) over its selection.
 * - FedBuff: `concurrency` trainers are always training (the same count a synchronous round
 *   trains). When one finishes, its update is checked for staleness (refused with the reason past
 *   `maxStaleness`) and buffered as its delta from the version it started from; every
 *   `bufferSize` buffered updates the server steps (bufferedStep, FedBuff's 1/sqrt(1 + s)
 *   weight) and the version moves on; then a trainer is drawn to start from the current model
 *   (selectClients over those neither training nor holding a buffered update on this version,
 *   one at a time, seeded by the job's seed and the draw's number). Ties in finishing time go in
 *   name order.
 *
 * Deterministic: a trainer's update is a pure function of the model it started from and its data,
 * so launching its training when it starts (on the worker pool, in parallel with the others in
 * flight) and taking it when the clock reaches its finish gives the same run every time.
 */
import { ValidationError } from '../../shared/errors/index.js';
import type { WeightUpdate } from '../../shared/fl/fedavg.js';
import { bufferedStep, checkStaleness, modelDelta } from '../../shared/fl/strategy/fedbuff.js';
import type { BufferedUpdate, StalenessPolicy } from '../../shared/fl/strategy/fedbuff.js';
import { selectClients } from '../../shared/fl/strategy/selection.js';
import type { NamedTensors } from '../../shared/fl/weights.js';
import type { Evaluation, LocalTrainOptions } from '../../shared/fl/local-train.js';
import { seededRandom, shuffle } from '../../shared/random/index.js';
import { readInitializers, replaceInitializers } from '../../shared/training/onnx-export.js';
import type { Client } from './federation.js';
import type { CurvePoint } from './curves.js';
import type { SelectClients, TrainRound } from './simulate.js';

/** FedBuff's staleness weight: 1 / sqrt(1 + staleness). */
const fedBuffPolicy: StalenessPolicy = { kind: 'polynomial', a: 0.5 };

/**
 * Time per local training of each client: 1 to `slowest`, evenly spaced, dealt to the clients by
 * a shuffle seeded from `seed` (its own stream, not the partition's or the selection's).
 */
function trainerSpeeds(
  names: readonly string[],
  slowest: number,
  seed: number,
): Map<string, number> {
  if (!(Number.isFinite(slowest) && slowest >= 1)) {
    throw new RangeError(`the slowest trainer's factor ${slowest} is not a number >= 1`);
  }
  const n = names.length;
  const order = shuffle(
    names.map((_, i) => i),
    seededRandom((seed ^ 0x0fedb0ff) >>> 0),
  );
  const speeds = new Map<string, number>();
  order.forEach((client, rank) => {
    speeds.set(names[client] ?? '', n === 1 ? 1 : 1 + ((slowest - 1) * rank) / (n - 1));
  });
  return speeds;
}

/** The simulated end of each synchronous round 1..rounds: the running sum of its slowest. */
function synchronousClock(
  names: readonly string[],
  select: SelectClients,
  speeds: ReadonlyMap<string, number>,
  rounds: number,
): number[] {
  const ends: number[] = [];
  let clock = 0;
  for (let round = 1; round <= rounds; round += 1) {
    clock += Math.max(...select(names, round).map((w) => speeds.get(w) ?? NaN));
    ends.push(clock);
  }
  return ends;
}

interface AsyncOptions {
  readonly clients: readonly Client[];
  readonly initialModel: Uint8Array;
  readonly local: LocalTrainOptions;
  readonly speeds: ReadonlyMap<string, number>;
  /** K: buffered updates per server step. */
  readonly bufferSize: number;
  readonly maxStaleness: number;
  readonly concurrency: number;
  readonly serverLr: number;
  readonly seed: number;
  /** Server steps at most. */
  readonly maxSteps: number;
  /** Stop at the first evaluated version at or above this accuracy. */
  readonly target: number;
}

interface AsyncDeps {
  readonly train: TrainRound;
  readonly evaluate: (model: Uint8Array) => Promise<Evaluation>;
  readonly onPoint?: (point: TimedPoint) => void;
}

/** A version's test accuracy at its simulated time (round = the model version). */
interface TimedPoint extends CurvePoint {
  readonly time: number;
}

interface AsyncResult {
  /** Version 0 (time 0) and every version after it. */
  readonly curve: readonly TimedPoint[];
  readonly steps: number;
  /** Updates received (each a local training that finished). */
  readonly received: number;
  /** Updates refused as too stale, with the reason checkStaleness gave. */
  readonly refused: ReadonlyArray<{ readonly worker: string; readonly reason: string }>;
  /** Staleness of every applied update, in the order applied. */
  readonly staleness: readonly number[];
  /** The step whose training or result was not finite, if any. */
  readonly divergedAt: number | undefined;
}

interface InFlight {
  readonly worker: string;
  readonly version: number;
  readonly finish: number;
  readonly update: Promise<WeightUpdate>;
}

const finiteUpdate = (u: WeightUpdate) =>
  [...u.weights.values()].every((t) => t.values.every((v) => Number.isFinite(v)));

/** The server's side of a FedBuff run: the model versions, the buffer, what it refused. */
class BufferedServer {
  bytes: Uint8Array;
  version = 0;
  buffer: BufferedUpdate[] = [];
  readonly refused: Array<{ worker: string; reason: string }> = [];
  readonly staleness: number[] = [];
  /** The versions an update in flight may have started from (no further back than allowed). */
  readonly #versions: Map<number, NamedTensors>;

  constructor(
    initialModel: Uint8Array,
    private readonly options: AsyncOptions,
  ) {
    this.bytes = initialModel;
    this.#versions = new Map([[0, readInitializers(initialModel)]]);
  }

  /** Buffers `update` (trained from `from`) or refuses it as too stale, with the reason. */
  receive(worker: string, from: number, update: WeightUpdate): void {
    try {
      checkStaleness(from, this.version, this.options.maxStaleness);
      const delta = modelDelta(this.#model(from), update);
      this.buffer.push({ worker, version: from, samples: update.samples, delta });
    } catch (error) {
      if (!(error instanceof ValidationError)) throw error;
      this.refused.push({ worker, reason: error.message });
    }
  }

  /** Steps when the buffer holds K updates; returns whether it did. */
  maybeStep(): boolean {
    if (this.buffer.length < this.options.bufferSize) return false;
    const step = bufferedStep({
      base: this.#model(this.version),
      version: this.version,
      buffered: this.buffer,
      serverLr: this.options.serverLr,
      policy: fedBuffPolicy,
      maxStaleness: this.options.maxStaleness,
    });
    this.staleness.push(...step.applied.map((a) => a.staleness));
    this.buffer = [];
    this.version += 1;
    this.bytes = replaceInitializers(this.bytes, step.weights);
    this.#versions.set(this.version, step.weights);
    for (const v of this.#versions.keys()) {
      if (v < this.version - this.options.maxStaleness) this.#versions.delete(v);
    }
    return true;
  }

  #model(version: number): NamedTensors {
    const model = this.#versions.get(version);
    if (model === undefined) throw new Error(`version ${version} is not kept`);
    return model;
  }
}

/** FedBuff's run to the target (or maxSteps), on the simulated clock. */
async function runFedBuff(options: AsyncOptions, deps: AsyncDeps): Promise<AsyncResult> {
  const names = options.clients.map((c) => c.name);
  const byName = new Map(options.clients.map((c) => [c.name, c]));
  const server = new BufferedServer(options.initialModel, options);
  const curve: TimedPoint[] = [];
  const inFlight: InFlight[] = [];
  let clock = 0;
  let received = 0;
  let draws = 0;
  let divergedAt: number | undefined;

  const evaluate = async () => {
    const { accuracy, loss } = await deps.evaluate(server.bytes);
    const point = { round: server.version, time: clock, accuracy, loss };
    curve.push(point);
    deps.onPoint?.(point);
    return accuracy;
  };
  const startOne = () => {
    // Not a trainer still training, nor one whose update on this version waits in the buffer: it
    // would train from the same model, data and seed again, and a repeated (worker, version) is
    // refused as a duplicate (bufferedStep), as the aggregator's idempotency would refuse it.
    const busy = new Set(inFlight.map((f) => f.worker));
    for (const b of server.buffer) if (b.version === server.version) busy.add(b.worker);
    draws += 1;
    const [worker] = selectClients({
      available: names.filter((n) => !busy.has(n)),
      fraction: 0,
      minimum: 1,
      seed: options.seed,
      round: draws,
    });
    if (worker === undefined) throw new Error('no idle trainer to start');
    const task = { worker, indices: byName.get(worker)?.indices ?? [], options: options.local };
    const update = deps.train(server.bytes, [task]).then(([u]) => {
      if (u === undefined) throw new Error(`${worker} sent no update`);
      return u;
    });
    // Settled here so a run that stops early leaves no rejection unhandled.
    update.catch(() => undefined);
    const finish = clock + (options.speeds.get(worker) ?? NaN);
    inFlight.push({ worker, version: server.version, finish, update });
  };

  let best = await evaluate();
  for (let i = 0; i < options.concurrency; i += 1) startOne();
  while (best < options.target && server.version < options.maxSteps) {
    inFlight.sort((a, b) => a.finish - b.finish || (a.worker < b.worker ? -1 : 1));
    const next = inFlight.shift();
    if (next === undefined) break;
    clock = next.finish;
    const update = await next.update;
    received += 1;
    if (!finiteUpdate(update)) {
      divergedAt = server.version + 1;
      break;
    }
    server.receive(next.worker, next.version, update);
    if (server.maybeStep()) best = Math.max(best, await evaluate());
    startOne();
  }
  const { version: steps, refused, staleness } = server;
  return { curve, steps, received, refused, staleness, divergedAt };
}

/** The first point at or above `target` (its simulated time), if any. */
function timeToTarget(curve: readonly TimedPoint[], target: number): number | undefined {
  return curve.find((p) => p.accuracy >= target)?.time;
}

export { fedBuffPolicy, trainerSpeeds, synchronousClock, runFedBuff, timeToTarget };
export type { AsyncOptions, AsyncDeps, AsyncResult, TimedPoint };
