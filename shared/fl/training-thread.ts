/**
 * A trainer's rounds computed on a thread of their own, at a lower CPU priority (a niceness on
 * that thread alone: Linux applies setpriority to the calling thread). The trainer's main thread
 * keeps answering its health checks and its events while a round trains for minutes, and
 * whatever else the edge node runs at normal priority — an inference worker, the trainer's own
 * messaging — goes before the training.
 *
 * The thread loads this very module (its URL, so that the same code runs from the compiled build
 * and from the image's bundle, where it is a chunk) and keeps the Dataset it read between rounds.
 * A round superseded by a newer one terminates the thread (pure JavaScript: nothing is left
 * half-done) and the next round starts another; a thread that dies fails its round as
 * retryable. Under the test runner this module is TypeScript, which a bare thread cannot load:
 * localTraining then trains on the caller's thread.
 */
import { setPriority } from 'node:os';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import type { TrainingParameters } from '../messages/federated.js';
import type { Logger } from '../telemetry/index.js';
import { cachedDatasetReader } from './dataset-source.js';
import type { DatasetSource } from './dataset-source.js';
import { RoundFailure, computeRound, exitCodes, inThreadTraining } from './round-compute.js';
import type { LocalTraining, Trained } from './round-compute.js';

/** What the thread is started with. */
interface ThreadData {
  role: typeof role;
  source: DatasetSource;
  nice: number;
}

/** Marks the thread this module starts, which runs trainingThreadMain as it loads the module. */
const role = 'edgeai-fl-training';

type Request =
  | { kind: 'run'; id: number; model: Uint8Array; training: TrainingParameters }
  | { kind: 'prefetch' };

type Reply =
  | ({ kind: 'trained'; id: number } & Trained)
  | { kind: 'failed'; id: number; exitCode: number; message: string }
  | { kind: 'warning'; message: string };

const messageOf = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** The bytes in an ArrayBuffer of their own, which can be transferred. */
function own(bytes: Uint8Array): Uint8Array {
  const whole = bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength;
  return whole && bytes.buffer instanceof ArrayBuffer ? bytes : new Uint8Array(bytes);
}

/** The thread's side: computes each round it is sent, one at a time. */
function trainingThreadMain(): void {
  const port = parentPort;
  if (port === null) throw new Error('trainingThreadMain runs on a worker thread');
  const { source, nice } = workerData as ThreadData;
  try {
    setPriority(0, nice);
  } catch (err) {
    port.postMessage({ kind: 'warning', message: `niceness ${nice}: ${messageOf(err)}` });
  }
  const data = { read: cachedDatasetReader(), source };
  port.on('message', (request: Request) => {
    if (request.kind === 'prefetch') {
      data.read(source).catch(() => undefined);
      return;
    }
    const { id, model, training } = request;
    computeRound(model, training, data).then(
      (trained) => {
        const encoded = own(trained.encoded);
        const reply: Reply = { kind: 'trained', id, ...trained, encoded };
        port.postMessage(reply, [encoded.buffer as ArrayBuffer]);
      },
      (err: unknown) => {
        const failure =
          err instanceof RoundFailure
            ? err
            : new RoundFailure(exitCodes.rejected, `unexpected: ${messageOf(err)}`);
        const reply: Reply = {
          kind: 'failed',
          id,
          exitCode: failure.exitCode,
          message: failure.message,
        };
        port.postMessage(reply);
      },
    );
  });
}

interface Pending {
  resolve(trained: Trained): void;
  reject(err: unknown): void;
}

/** Rounds on a thread at niceness `nice`, started on first use and after each termination. */
function threadTraining(options: { source: DatasetSource; nice: number; log: Logger }) {
  const { log } = options;
  let thread: { worker: Worker; pending: Map<number, Pending> } | undefined;
  let nextId = 0;

  const start = () => {
    const pending = new Map<number, Pending>();
    // Loading the module is enough (below): in the bundle it is a chunk that exports nothing.
    const code = `import(${JSON.stringify(import.meta.url)})`;
    const data: ThreadData = { role, source: options.source, nice: options.nice };
    const worker = new Worker(code, { eval: true, workerData: data });
    worker.unref();
    const mine = { worker, pending };
    const failAll = (err: unknown) => {
      if (thread === mine) thread = undefined;
      for (const p of pending.values()) p.reject(err);
      pending.clear();
    };
    worker.on('message', (reply: Reply) => {
      if (reply.kind === 'warning') return log.warn({ reason: reply.message }, 'training thread');
      const waiting = pending.get(reply.id);
      pending.delete(reply.id);
      if (reply.kind === 'trained') waiting?.resolve(reply);
      else waiting?.reject(new RoundFailure(reply.exitCode, reply.message));
    });
    worker.on('error', (err) => {
      log.error({ err }, 'the training thread failed');
      failAll(new RoundFailure(exitCodes.transient, `the training thread failed: ${err.message}`));
    });
    worker.on('exit', (code) => {
      failAll(new RoundFailure(exitCodes.transient, `the training thread exited (${code})`));
    });
    thread = mine;
    return mine;
  };

  const training: LocalTraining = {
    run(model, params, signal) {
      signal.throwIfAborted();
      const current = thread ?? start();
      const id = (nextId += 1);
      return new Promise<Trained>((resolve, reject) => {
        const onAbort = () => {
          current.pending.delete(id);
          if (thread === current) thread = undefined;
          // Pure JavaScript on that thread: stopping it mid-round leaves nothing half-done.
          void current.worker.terminate();
          const reason: unknown = signal.reason;
          reject(reason instanceof Error ? reason : new Error(String(reason)));
        };
        signal.addEventListener('abort', onAbort, { once: true });
        const settle =
          <T>(fn: (value: T) => void) =>
          (value: T) => {
            signal.removeEventListener('abort', onAbort);
            fn(value);
          };
        current.pending.set(id, { resolve: settle(resolve), reject: settle(reject) });
        // A copy (not Buffer's slice, a view): the caller's bytes are not detached from it.
        const copy = new Uint8Array(model);
        const request: Request = { kind: 'run', id, model: copy, training: params };
        current.worker.postMessage(request, [copy.buffer]);
      });
    },
    prefetch() {
      (thread ?? start()).worker.postMessage({ kind: 'prefetch' } satisfies Request);
    },
    async close() {
      const current = thread;
      thread = undefined;
      await current?.worker.terminate();
    },
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

if (!isMainThread && (workerData as Partial<ThreadData> | null)?.role === role)
  trainingThreadMain();

export { localTraining, threadTraining };
