/**
 * A condition of the table made runnable: its federation (the training digits split over the
 * clients, the initial 2NN, the seeded selector) and its algorithm (local training at a learning
 * rate, the server step), from one seed. The bench and `conditionDigests` (what a run over HTTP
 * through the functions is compared with) both build conditions here, so they cannot drift apart.
 *
 * Seeds, all `seed`: the partition, the initial model's He initialization, the per-round client
 * selection (shared/fl/strategy/selection.ts selectClients, fl-aggregator's own, with the job's
 * selection as reconcile-tick writes it: fraction C, minimum 1 (minFitClients' default), seed =
 * training.seed), every trainer's local training seed (the job's training.seed, sent unchanged
 * each round as the functions do) and the poisoned trainers' draw.
 */
import { selectClients } from '../../shared/fl/strategy/selection.js';
import type { Attack } from '../../shared/fl/strategy/poison.js';
import type { Strategy } from '../../shared/fl/strategy/types.js';
import type { Split } from '../../shared/training/data.js';
import { twoNN } from '../../shared/training/models.js';
import { conditions, defaultAttack } from './conditions.js';
import type { ReadyCondition } from './conditions.js';
import { buildClients, digits, initialModel } from './federation.js';
import { poisoner } from './poisoned.js';
import { inProcessTrainer, roundDigests, strategyStep } from './simulate.js';
import type { Algorithm, Federation, SelectClients } from './simulate.js';

/** The paper's 2NN (784-200-200-10, ReLU): the model every condition trains. */
const model = twoNN;

interface FederationOptions {
  readonly clients: number;
  /** C, the share of clients selected per round. */
  readonly fraction: number;
  readonly seed: number;
}

/**
 * The round's trainers as fl-aggregator selects them: selectClients over the clients' names with
 * the job's fraction, minimum 1 and seed.
 */
function jobSelector(fraction: number, seed: number): SelectClients {
  return (clients, round) =>
    selectClients({ available: clients, fraction, minimum: 1, seed, round });
}

/** The federation of `condition.split` over the training split `train`. */
function federationFor(
  train: Split,
  split: ReadyCondition['split'],
  options: FederationOptions,
): Federation {
  return {
    clients: buildClients(train.y, split, options.clients, options.seed),
    initialModel: initialModel(model.layers, model.name, options.seed),
    select: jobSelector(options.fraction, options.seed),
  };
}

/** What a run may set beside the local rate: the server optimizer's eta, the attack. */
interface AlgorithmOptions {
  /** The server optimizer's eta, for a strategy that has one (a RangeError otherwise). */
  readonly serverRate?: number;
  /** The poisoned trainers' attack (default: conditions.ts's defaultAttack). */
  readonly attack?: Attack;
}

/** `strategy` with server eta `eta`; a RangeError for a strategy without a server optimizer. */
function withServerRate(strategy: Strategy, eta: number): Strategy {
  if (
    strategy.kind === 'fedadam' ||
    strategy.kind === 'fedyogi' ||
    strategy.kind === 'fedadagrad'
  ) {
    return { ...strategy, eta };
  }
  throw new RangeError(`${strategy.kind} has no server learning rate`);
}

/** `condition`'s algorithm at learning rate `rate`, local training seeded `seed`. */
function algorithmFor(
  condition: ReadyCondition,
  rate: number,
  seed: number,
  options: AlgorithmOptions = {},
): Algorithm {
  const strategy =
    options.serverRate === undefined
      ? condition.strategy
      : withServerRate(condition.strategy, options.serverRate);
  const { poisoned } = condition;
  return {
    local: { ...condition.local, learningRate: rate, seed },
    server: strategyStep(strategy),
    ...(poisoned === undefined
      ? {}
      : {
          corrupt: poisoner(
            options.attack ?? poisoned.attack ?? defaultAttack,
            poisoned.count,
            seed,
          ),
        }),
  };
}

/** The ready condition `id` of the table; throws a RangeError naming the ready ids. */
function readyCondition(id: string): ReadyCondition {
  const found = conditions.find((c) => c.id === id);
  if (found?.status !== 'ready') {
    const ready = conditions.filter((c) => c.status === 'ready').map((c) => c.id);
    throw new RangeError(`${id} is not a ready condition (one of: ${ready.join(', ')})`);
  }
  return found;
}

/**
 * The sha256 of the global weights (weightsDigest: sha256 of encodeWeights) after each of rounds
 * 1..`rounds` of condition `id` at learning rate `learningRate`, run in-process on this thread
 * with the bench's federation (100 clients, C = 0.1 unless given) for `seed`. The same condition
 * run through fl-aggregator and fl-trainer must give the same digests, round by round, given the
 * same: initial model (initialModel(twoNN.layers, '2nn', seed)), trainer names (client-<i>, whose
 * Dataset file is writeDatasetCsv(train, indices of client i)), training parameters (the
 * condition's epochs and batchSize, this rate, proximalMu, training.seed = seed) and selection.
 */
async function conditionDigests(
  id: string,
  rounds: number,
  options: {
    learningRate: number;
    seed: number;
    clients?: number;
    fraction?: number;
    serverRate?: number;
  },
): Promise<string[]> {
  const condition = readyCondition(id);
  const { train } = digits();
  const federation = federationFor(train, condition.split, {
    clients: options.clients ?? 100,
    fraction: options.fraction ?? 0.1,
    seed: options.seed,
  });
  const algorithm = algorithmFor(
    condition,
    options.learningRate,
    options.seed,
    options.serverRate === undefined ? {} : { serverRate: options.serverRate },
  );
  return roundDigests(federation, algorithm, inProcessTrainer(train, model.layers), rounds);
}

export { model, jobSelector, federationFor, algorithmFor, readyCondition, conditionDigests };
export type { FederationOptions, AlgorithmOptions };
