/**
 * A round's computation on a trainer: rebuild the global model from the layers it carries, read
 * this node's Dataset, train locally (trainNetwork), encode the weights. Pure computation, no
 * messaging: the trainer runs it on its main thread (inThreadTraining) or, in a built image, on a
 * thread of its own at a lower CPU priority (training-thread.ts), so that its messaging, its
 * health checks and whatever else the edge node serves go first.
 *
 * A round that cannot be trained throws a RoundFailure with the exit code it is reported with
 * (the restart policy's convention: 1-127 permanent, 128-255 retryable).
 */
import { ValidationError } from '../errors/index.js';
import type { TrainingParameters } from '../messages/federated.js';
import type { Split } from '../training/data.js';
import { Network } from '../training/network.js';
import type { LayerSpec } from '../training/network.js';
import { exportOnnx, readTrainable } from '../training/onnx-export.js';
import type { DatasetReader, DatasetSource } from './dataset-source.js';
import { trainInPlace } from './local-train.js';
import { digitShape, loadWeights, parameterTensors } from './network-weights.js';
import { encodeWeights } from './weights.js';
import type { NamedTensors } from './weights.js';

/** The exit codes a failed round is reported with. */
const exitCodes = Object.freeze({
  /** The aggregator refused a request as malformed or unauthorized (400/401/403/413), or a bug. */
  rejected: 1,
  /** The Dataset cannot be read or parsed, or its format is not csv: the user must fix it. */
  dataset: 2,
  /** The model is not one the trainer can rebuild (no layers, other architecture, too large). */
  model: 3,
  /** Transient: the aggregator or the model unreachable until the deadline, a corrupt download. */
  transient: 143,
});

/** A round that cannot be trained, with the exit code it is reported with. */
class RoundFailure extends Error {
  override readonly name = 'RoundFailure';
  constructor(
    readonly exitCode: number,
    message: string,
  ) {
    super(message);
  }
}

/** A trained round: what the update carries. */
interface Trained {
  readonly samples: number;
  /** Mean cross-entropy over the last epoch's steps. */
  readonly loss: number;
  /** Milliseconds of training (after the model is loaded and the data checked). */
  readonly trainMs: number;
  /** The weights, encoded as updates carry them (weights.ts). */
  readonly encoded: Uint8Array;
}

/** Where a round's computation runs. */
interface LocalTraining {
  /**
   * Trains `model` (an exportOnnx model) on this node's Dataset. Rejects with a RoundFailure, or
   * with `signal`'s reason once it aborts (a newer round superseded this one).
   */
  run(model: Uint8Array, training: TrainingParameters, signal: AbortSignal): Promise<Trained>;
  /** Reads the Dataset ahead of the first round; a failure is that round's to report. */
  prefetch(): void;
  /**
   * Hands back a round's `encoded` update once it is sent (or given up): a later round's update
   * may be written into its memory, so the caller must not read it any more.
   */
  release(trained: Trained): void;
  close(): Promise<void>;
}

const messageOf = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** A round's global model decoded: the layers exportOnnx wrote and its named weights. */
interface DecodedModel {
  readonly layers: readonly LayerSpec[];
  readonly weights: NamedTensors;
}

/**
 * The layers and weights of a model written by exportOnnx (RoundFailure 3 otherwise), the
 * weights copied into `memory` (new buffers by default). Decoded where the round arrives, at the
 * trainer's own priority: the training thread, niceness lowered, only trains.
 */
function decodeModel(model: Uint8Array, memory?: Memory): DecodedModel {
  let layers: LayerSpec[] | undefined;
  let weights: NamedTensors;
  try {
    ({ layers, weights } = readTrainable(model, memory));
  } catch (err) {
    throw new RoundFailure(exitCodes.model, `the model is not ONNX: ${messageOf(err)}`);
  }
  if (layers === undefined || layers.length === 0) {
    throw new RoundFailure(
      exitCodes.model,
      'the model carries no layers (the `layers` metadata exportOnnx writes): the trainer cannot rebuild it',
    );
  }
  return { layers, weights };
}

/** The Network a round loads the global weights into, for its layers. */
type NetworkFor = (layers: readonly LayerSpec[]) => Network;

/** The memory an encoded update is written into, for its size in bytes (4-byte aligned). */
type Memory = (bytes: number) => Uint8Array;

/** What a round's computation builds its Network in and writes its update into. */
interface Workspace {
  readonly network: NetworkFor;
  readonly memory: Memory;
}

/** A new Network and new memory for every round. */
const freshWorkspace: Workspace = {
  network: (layers) => new Network(digitShape, layers),
  memory: (bytes) => new Uint8Array(bytes),
};

/**
 * The Network of the last architecture trained, kept from one round to the next: a round loads
 * the global weights into it (loadWeights overwrites every parameter) rather than allocating two
 * float64 arrays per parameter again. For a caller that trains one round at a time.
 */
function keptNetwork(): NetworkFor {
  let kept: { key: string; network: Network } | undefined;
  return (layers) => {
    const key = JSON.stringify(layers);
    if (kept?.key !== key) kept = { key, network: new Network(digitShape, layers) };
    return kept.network;
  };
}

/**
 * The memory a round's model is decoded into, reused round after round: one SharedArrayBuffer
 * that the thread reads the weights from (shared: neither copied nor transferred), grown to what
 * the round before needed. New memory costs a page fault per 4 KiB on first touch; on the
 * 10-trainer bench the decode's were a tenth of a trainer's main-thread CPU between a round's
 * event and its training (perf, 2026-11-28). A round decodes into it once the round before is done or
 * superseded; a superseded round's thread may still read it, but its result is thrown away.
 */
function reusedMemory(): { memory: Memory; reset(): void } {
  let buffer = new SharedArrayBuffer(0);
  let used = 0;
  let wanted = 0;
  return {
    reset() {
      if (wanted > buffer.byteLength) buffer = new SharedArrayBuffer(wanted);
      used = 0;
      wanted = 0;
    },
    memory(bytes) {
      const size = Math.ceil(bytes / 8) * 8;
      wanted += size;
      if (used + size > buffer.byteLength)
        return new Uint8Array(new SharedArrayBuffer(size), 0, bytes);
      const view = new Uint8Array(buffer, used, bytes);
      used += size;
      return view;
    },
  };
}

/** The decoded model as a Network holding its weights (RoundFailure 3 when they do not fit). */
function rebuild(model: DecodedModel, networkFor: NetworkFor): Network {
  try {
    const net = networkFor(model.layers);
    return loadWeights(net, model.weights);
  } catch (err) {
    throw new RoundFailure(exitCodes.model, `the model cannot be rebuilt: ${messageOf(err)}`);
  }
}

/** This node's Dataset (RoundFailure 2 when it cannot be read). */
async function loadData(read: DatasetReader, source: DatasetSource, classes: number) {
  try {
    return await read({ ...source, classes });
  } catch (err) {
    throw new RoundFailure(exitCodes.dataset, `the Dataset cannot be used: ${messageOf(err)}`);
  }
}

/** Local training and the encoded weights (RoundFailure 2 for data that does not fit). */
function train(
  network: Network,
  data: Split,
  training: TrainingParameters,
  memory: Memory,
): Trained {
  let trained: ReturnType<typeof trainInPlace>;
  try {
    trained = trainInPlace(network, data, training);
  } catch (err) {
    const code = err instanceof ValidationError ? exitCodes.dataset : exitCodes.rejected;
    throw new RoundFailure(code, `local training failed: ${messageOf(err)}`);
  }
  try {
    return { ...trained, encoded: encodeWeights(parameterTensors(network), memory) };
  } catch (err) {
    // Non-finite weights: training diverged with these parameters.
    throw new RoundFailure(exitCodes.rejected, `the trained weights: ${messageOf(err)}`);
  }
}

/** One round's computation, from the decoded model to the encoded weights. */
async function computeRound(
  model: DecodedModel,
  training: TrainingParameters,
  data: { read: DatasetReader; source: DatasetSource },
  workspace: Workspace = freshWorkspace,
): Promise<Trained> {
  const network = rebuild(model, workspace.network);
  const split = await loadData(data.read, data.source, network.outputSize);
  return train(network, split, training, workspace.memory);
}

/**
 * A small model of the digits' shape (784 -> 16 -> ReLU -> 10: the kinds of layer of the 2NN and
 * mlp256) and the first samples of `read`'s Dataset: a round's whole computation run once on them
 * before the first round (warmUp), so that round's decode, rebuild and training do not run cold
 * (a function's first runs are its slowest, the JIT not having compiled it yet).
 */
const warmUpModel = () =>
  exportOnnx(
    new Network(
      [1, 28, 28],
      [{ type: 'dense', units: 16 }, { type: 'relu' }, { type: 'dense', units: 10 }],
    ),
    'warm-up',
    'edgeai',
  );

const warmUpTraining = { epochs: 1, batchSize: 10, learningRate: 0.01, seed: 1, proximalMu: 0 };

/** Runs a round's computation on warmUpModel and 50 samples of the Dataset; never throws. */
async function warmUp(data: { read: DatasetReader; source: DatasetSource }): Promise<void> {
  const first = (split: Split): Split => {
    const n = Math.min(split.n, 50);
    return { x: split.x.subarray(0, n * (split.x.length / split.n)), y: split.y.subarray(0, n), n };
  };
  const read: DatasetReader = async (source) => first(await data.read(source));
  await computeRound(decodeModel(warmUpModel()), warmUpTraining, {
    read,
    source: data.source,
  }).catch(() => undefined);
}

/** The computation on the caller's thread (tests, the functions-framework CLI). */
function inThreadTraining(data: { read: DatasetReader; source: DatasetSource }): LocalTraining {
  return {
    async run(model, training, signal) {
      signal.throwIfAborted();
      return computeRound(decodeModel(model), training, data);
    },
    prefetch() {
      data.read(data.source).catch(() => undefined);
    },
    // Each round's update is written into new memory.
    release: () => undefined,
    close: () => Promise.resolve(),
  };
}

export {
  RoundFailure,
  computeRound,
  decodeModel,
  exitCodes,
  inThreadTraining,
  keptNetwork,
  reusedMemory,
  warmUp,
  warmUpModel,
};
export type { DecodedModel, LocalTraining, Memory, Trained };
