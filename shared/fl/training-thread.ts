/**
 * A trainer's rounds computed on a thread of their own, at a lower CPU priority (niced-thread.ts).
 * The trainer's main thread keeps answering its health checks and its events while a round
 * trains for minutes, and whatever else the edge node runs at normal priority — an inference
 * worker, the trainer's own messaging — goes before the training. The model is decoded where the
 * round arrives, at the trainer's priority: the thread only trains.
 *
 * The thread reads the Dataset as it starts and keeps it between rounds. A round superseded by a
 * newer one terminates the thread (pure JavaScript: nothing is left half-done) and the next
 * round starts another; a thread that dies fails its round as retryable. Under the test runner
 * this module is TypeScript, which a bare thread cannot load: localTraining then trains on the
 * caller's thread.
 */
import type { TrainingParameters } from '../messages/federated.js';
import type { Logger } from '../telemetry/index.js';
import { collectGarbage } from './collect-garbage.js';
import { cachedDatasetReader } from './dataset-source.js';
import type { DatasetSource } from './dataset-source.js';
import { nicedThread, serveCalls, startedFor } from './niced-thread.js';
import {
  RoundFailure,
  computeRound,
  decodeModel,
  exitCodes,
  inThreadTraining,
  keptNetwork,
  reusedMemory,
  warmUp,
  warmUpModel,
} from './round-compute.js';
import type { DecodedModel, LocalTraining, Memory, Trained } from './round-compute.js';

/** Marks the thread this module starts. */
const role = 'edgeai-fl-training';

interface Request {
  model: DecodedModel;
  training: TrainingParameters;
  /** Memory of an update already sent, to write this round's into (shared, not copied). */
  memory: SharedArrayBuffer | undefined;
}

const messageOf = (err: unknown) => (err instanceof Error ? err.message : String(err));

/**
 * The round's update written into the memory its request brought, when large enough, else into
 * new shared memory: either way the main thread sends it from there (no copy, and memory reused
 * round after round costs no page faults).
 */
const sharedMemory =
  (given: SharedArrayBuffer | undefined): Memory =>
  (bytes) =>
    new Uint8Array(
      given !== undefined && given.byteLength >= bytes ? given : new SharedArrayBuffer(bytes),
      0,
      bytes,
    );

/** The thread's side: reads the Dataset at once, then computes each round it is sent. */
function trainingThreadMain(nice: number, source: DatasetSource): void {
  const data = { read: cachedDatasetReader(), source };
  const network = keptNetwork();
  serveCalls<Request, Trained>(
    nice,
    async ({ model, training, memory }) => {
      const workspace = { network, memory: sharedMemory(memory) };
      return { result: await computeRound(model, training, data, workspace) };
    },
    (err) =>
      err instanceof RoundFailure
        ? { code: err.exitCode, message: err.message }
        : { code: exitCodes.rejected, message: `unexpected: ${messageOf(err)}` },
  );
  // The Dataset read, then a round's computation run once on a small model (round-compute.ts),
  // then the garbage of both collected before the first round (collect-garbage.ts).
  void warmUp(data).then(collectGarbage);
}

/** Rounds on a thread at niceness `nice`, started on first use and after each termination. */
function threadTraining(options: { source: DatasetSource; nice: number; log: Logger }) {
  const thread = nicedThread<Request, Trained>({
    moduleUrl: import.meta.url,
    role,
    nice: options.nice,
    data: options.source,
    name: 'training thread',
    log: options.log,
    failure: (code, message) => new RoundFailure(code ?? exitCodes.transient, message),
  });
  /** The memory of the last update sent (release), which the next round's is written into. */
  let sent: SharedArrayBuffer | undefined;
  const decoded = reusedMemory();
  const training: LocalTraining = {
    async run(bytes, params, signal) {
      signal.throwIfAborted();
      // Decoded here, at the trainer's priority (a RoundFailure 3 rejects the round at once),
      // into memory the thread shares (reusedMemory). The update is written into the memory of
      // the last one sent, which nothing reads any more.
      decoded.reset();
      const model = decodeModel(bytes, decoded.memory);
      const memory = sent;
      sent = undefined;
      return thread.call({ model, training: params, memory }, { signal });
    },
    release({ encoded }) {
      if (encoded.buffer instanceof SharedArrayBuffer) sent = encoded.buffer;
    },
    prefetch() {
      thread.start();
      // This thread's part of a round, decoding, run once before the first round; then the
      // start-up's garbage collected, not in round 1 or 2 (collect-garbage.ts).
      decodeModel(warmUpModel());
      collectGarbage();
    },
    close: () => thread.close(),
  };
  return training;
}

/**
 * Where this process trains: a thread at niceness `nice` when this module is JavaScript (the
 * build, the image), else (the test runner's TypeScript) the caller's thread.
 */
function localTraining(options: { source: DatasetSource; nice: number; log: Logger }) {
  if (import.meta.url.endsWith('.ts')) {
    return inThreadTraining({ read: cachedDatasetReader(), source: options.source });
  }
  return threadTraining(options);
}

const started = startedFor(role);
if (started !== undefined) trainingThreadMain(started.nice, started.data as DatasetSource);

export { localTraining, threadTraining };
