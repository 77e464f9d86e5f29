/**
 * Federated rounds in-process, through the modules the functions run: each selected client trains
 * with shared/fl/local-train's localTrain from the global model's ONNX bytes (as fl-trainer does),
 * the server step (shared/fl/strategy's aggregate, the aggregator's own entry: fedAvg for FedAvg
 * and FedSGD, FedAdam's server optimizer, FedTrimmedAvg, Krum) turns the round's updates into the
 * next weights, and the next global model is replaceInitializers of the base bytes with them (as
 * fl-aggregator does). Clients are named as the functions name their
 * trainers, so fedAvg sums in the same order and a round over HTTP gives the same bytes.
 *
 * Deterministic: the same federation, algorithm and seed give bit-identical weights every round,
 * whichever trainer (in-process or a worker-thread pool) ran the clients and in whatever order
 * their updates came back (fedAvg orders them by worker name).
 */
import { createHash } from 'node:crypto';
import { ValidationError } from '../../shared/errors/index.js';
import type { WeightUpdate } from '../../shared/fl/fedavg.js';
import { localTrain } from '../../shared/fl/local-train.js';
import type { LocalTrainOptions } from '../../shared/fl/local-train.js';
import { aggregate } from '../../shared/fl/strategy/aggregate.js';
import { initialState } from '../../shared/fl/strategy/state.js';
import type { Strategy, StrategyState } from '../../shared/fl/strategy/types.js';
import { encodeWeights } from '../../shared/fl/weights.js';
import type { NamedTensors, Tensor } from '../../shared/fl/weights.js';
import type { Split } from '../../shared/training/data.js';
import type { LayerSpec } from '../../shared/training/network.js';
import { readInitializers, replaceInitializers } from '../../shared/training/onnx-export.js';
import type { Client } from './federation.js';
import { subset } from './federation.js';

/** Picks the round's clients from `clients` (names); returns them in ascending name order. */
type SelectClients = (clients: readonly string[], round: number) => string[];

/** One selected client's work in a round. */
interface TrainTask {
  readonly worker: string;
  /** Its samples' indices in the training split the trainer holds. */
  readonly indices: readonly number[];
  readonly options: LocalTrainOptions;
}

/** Trains every task from `model` (ONNX bytes); the updates may come back in any order. */
type TrainRound = (model: Uint8Array, tasks: readonly TrainTask[]) => Promise<WeightUpdate[]>;

/** The server's step: the round's base weights and updates to the next global weights. */
type ServerStep = (
  base: NamedTensors,
  updates: readonly WeightUpdate[],
  round: number,
) => Map<string, Tensor>;

/** What a condition runs: the clients' local training and the server's aggregation. */
interface Algorithm {
  /**
   * Every selected client's localTrain options. Its `seed` is the job's training seed, sent
   * unchanged to every trainer every round, as the functions send FlJobConfig.training.
   */
  readonly local: LocalTrainOptions;
  /** A fresh server step per run (a server optimizer such as FedAdam keeps state across rounds). */
  readonly server: () => ServerStep;
  /**
   * Poisoned trainers: the honest updates of a round (trained from `base`) to the ones the server
   * receives.
   */
  readonly corrupt?: (
    updates: readonly WeightUpdate[],
    base: NamedTensors,
    round: number,
  ) => WeightUpdate[];
}

interface Federation {
  readonly clients: readonly Client[];
  readonly initialModel: Uint8Array;
  readonly select: SelectClients;
}

/** A round's outcome: the new global model, or training diverged (non-finite weights). */
type RoundOutcome =
  | {
      readonly kind: 'model';
      readonly round: number;
      /** The global model after the round (ONNX bytes, as the aggregator saves it). */
      readonly model: Uint8Array;
      readonly weights: Map<string, Tensor>;
      readonly selected: readonly string[];
    }
  | {
      readonly kind: 'diverged';
      readonly round: number;
      /** The trainers whose weights were not finite (none when the server's step was not). */
      readonly workers: readonly string[];
    };

/**
 * `strategy`'s server step as fl-aggregator runs it: shared/fl/strategy's aggregate, the
 * strategy's state (a server optimizer's moments) carried from round to round. Each call of the
 * factory starts from the initial state.
 */
const strategyStep = (strategy: Strategy) => (): ServerStep => {
  let state: StrategyState = initialState;
  return (base, updates, round) => {
    const next = aggregate(strategy, base, updates, state, round);
    state = next.state;
    return next.weights;
  };
};

/** FedAvg's (and FedSGD's) server step: aggregate with `fedavg`, i.e. shared/fl/fedavg's fedAvg. */
const fedAvgStep = strategyStep({ kind: 'fedavg' });

/** Whether `error` is a strategy refusing a step whose result is not finite in float32. */
const nonFiniteResult = (error: unknown) =>
  error instanceof ValidationError && / of the aggregate: value .* not finite$/.test(error.message);

function finite(update: WeightUpdate): boolean {
  for (const { values } of update.weights.values()) {
    for (let i = 0; i < values.length; i += 1) if (!Number.isFinite(values[i])) return false;
  }
  return true;
}

/**
 * The federation's rounds 1, 2, ... under `algorithm`, one per iteration, for as long as the
 * caller iterates; ends after a round whose training diverged (a trainer refuses to send
 * non-finite weights, so no aggregator would take that round).
 */
async function* federatedRounds(
  federation: Federation,
  algorithm: Algorithm,
  train: TrainRound,
): AsyncGenerator<RoundOutcome, void, undefined> {
  const byName = new Map(federation.clients.map((c) => [c.name, c]));
  const names = federation.clients.map((c) => c.name);
  const server = algorithm.server();
  let model = federation.initialModel;
  let base: Map<string, Tensor> = readInitializers(model);
  for (let round = 1; ; round += 1) {
    const selected = federation.select(names, round);
    const tasks = selected.map((worker) => ({
      worker,
      indices: byName.get(worker)?.indices ?? [],
      options: algorithm.local,
    }));
    const honest = await train(model, tasks);
    const bad = honest.filter((u) => !finite(u)).map((u) => u.worker);
    if (bad.length > 0) {
      yield { kind: 'diverged', round, workers: bad };
      return;
    }
    const received = algorithm.corrupt?.(honest, base, round) ?? honest;
    try {
      base = server(base, received, round);
    } catch (error) {
      if (!nonFiniteResult(error)) throw error;
      yield { kind: 'diverged', round, workers: [] };
      return;
    }
    model = replaceInitializers(model, base);
    yield { kind: 'model', round, model, weights: base, selected };
  }
}

/** Trains the tasks one after another on this thread, from the training split `data`. */
function inProcessTrainer(data: Split, layers: readonly LayerSpec[]): TrainRound {
  return (model, tasks) =>
    Promise.resolve(
      tasks.map((task) => {
        const update = localTrain(model, layers, subset(data, task.indices), task.options);
        return { worker: task.worker, samples: update.samples, weights: update.weights };
      }),
    );
}

/**
 * sha256 (hex) of global weights in the update wire format (shared/fl/weights encodeWeights):
 * for a model saved by the aggregator, `weightsDigest(readInitializers(bytes))`.
 */
function weightsDigest(weights: NamedTensors): string {
  return createHash('sha256').update(encodeWeights(weights)).digest('hex');
}

/**
 * The sha256 of the global weights after each of rounds 1..`rounds` (fewer if training
 * diverged): what the same condition run over HTTP through the functions must reproduce.
 */
async function roundDigests(
  federation: Federation,
  algorithm: Algorithm,
  train: TrainRound,
  rounds: number,
): Promise<string[]> {
  const digests: string[] = [];
  if (rounds < 1) return digests;
  for await (const outcome of federatedRounds(federation, algorithm, train)) {
    if (outcome.kind === 'diverged') break;
    digests.push(weightsDigest(outcome.weights));
    if (outcome.round >= rounds) break;
  }
  return digests;
}

export { federatedRounds, fedAvgStep, strategyStep, inProcessTrainer, roundDigests, weightsDigest };
export type {
  Algorithm,
  Federation,
  RoundOutcome,
  SelectClients,
  ServerStep,
  TrainRound,
  TrainTask,
};
