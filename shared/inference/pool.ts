/**
 * Inference off the HTTP thread: onnxruntime's `run` blocks the thread it runs on, so models run
 * in worker threads. Requests that arrive while a worker is busy are coalesced into one session
 * run (dynamic batching: up to `maxBatch` rows, optionally waiting `maxWaitMs` for more), and the
 * queue is capped: past `maxQueueRows` a request is refused at once with a retryable 503 instead
 * of waiting without bound. Small requests go first: a batch-of-one caller should not wait
 * behind queued batches of hundreds (its latency is what it is judged by), while a large batch
 * hardly notices a few rows ahead of it. A large request that has waited `agingMs` goes first
 * in turn, so a stream of small ones cannot starve it.
 */
import type { Worker } from 'node:worker_threads';
import { UnavailableError } from '../errors/index.js';
import { startOnnxWorker } from './onnx-runtime.js';

interface PoolOptions {
  /** The ONNX model. */
  model: Uint8Array;
  /** Worker threads (each with its own session). */
  threads: number;
  /** Rows per session run at most. */
  maxBatch: number;
  /** Rows waiting at most; more is refused with 503. */
  maxQueueRows: number;
  /** How long a partial batch waits for more rows while a worker is free (0: never). */
  maxWaitMs: number;
  /** Called with the rows of each session run (batch-size metrics). */
  onRun?: (rows: number) => void;
}

interface InferencePool {
  readonly inputWidth: number;
  readonly outputWidth: number;
  /** Outputs for `rows` samples (`input.length === rows * inputWidth`). */
  infer(input: Float32Array, rows: number): Promise<Float32Array>;
  /** Rows waiting for a worker. */
  queuedRows(): number;
  close(): Promise<void>;
}

/** Requests of at most this many rows are served before larger ones. */
const smallRows = 8;
/** A large request waiting this long is served before small ones. */
const agingMs = 20;

interface Pending {
  input: Float32Array;
  rows: number;
  since: number;
  resolve(output: Float32Array): void;
  reject(err: Error): void;
}

interface Slot {
  worker: Worker;
  busy: boolean;
  batch: Pending[];
}

async function createInferencePool(options: PoolOptions): Promise<InferencePool> {
  const started = await Promise.all(
    Array.from({ length: options.threads }, () => startOnnxWorker(options.model)),
  );
  const { inputWidth, outputWidth } = started[0]!;
  const slots: Slot[] = started.map(({ worker }) => ({ worker, busy: false, batch: [] }));
  const small: Pending[] = [];
  const large: Pending[] = [];
  let queued = 0;
  let timer: NodeJS.Timeout | undefined;
  let closed = false;

  const fail = (slot: Slot, err: Error) => {
    for (const pending of slot.batch) pending.reject(err);
    slot.batch = [];
    slot.busy = false;
  };

  for (const slot of slots) {
    slot.worker.on('message', (message: { output?: Float32Array; error?: string }) => {
      const batch = slot.batch;
      slot.batch = [];
      slot.busy = false;
      if (message.output === undefined) {
        const err = new Error(`inference failed: ${message.error ?? 'unknown'}`);
        for (const pending of batch) pending.reject(err);
      } else {
        let offset = 0;
        for (const pending of batch) {
          const width = pending.rows * outputWidth;
          pending.resolve(message.output.slice(offset, offset + width));
          offset += width;
        }
      }
      dispatch();
    });
    slot.worker.on('error', (err) => fail(slot, err));
  }

  function take(): Pending[] {
    const batch: Pending[] = [];
    let rows = 0;
    const oldest = large[0];
    const order =
      oldest !== undefined && performance.now() - oldest.since >= agingMs
        ? [large, small]
        : [small, large];
    for (const queue of order) {
      while (queue.length > 0) {
        const next = queue[0]!;
        if (batch.length > 0 && rows + next.rows > options.maxBatch) break;
        queue.shift();
        batch.push(next);
        rows += next.rows;
        queued -= next.rows;
      }
    }
    return batch;
  }

  function run(slot: Slot, batch: Pending[]): void {
    const rows = batch.reduce((n, p) => n + p.rows, 0);
    options.onRun?.(rows);
    slot.busy = true;
    slot.batch = batch;
    // Posting copies each input once (as joining them here would); the worker joins them into
    // one tensor on its own thread.
    slot.worker.postMessage({ inputs: batch.map((pending) => pending.input), rows });
  }

  function dispatch(): void {
    if (timer !== undefined || queued === 0) return;
    const free = slots.find((slot) => !slot.busy);
    if (free === undefined) return;
    // A partial batch may wait a little for more rows; a full one (or maxWaitMs 0) runs now.
    if (options.maxWaitMs > 0 && queued < options.maxBatch) {
      timer = setTimeout(() => {
        timer = undefined;
        const slot = slots.find((s) => !s.busy);
        if (slot !== undefined && queued > 0) run(slot, take());
        dispatch();
      }, options.maxWaitMs);
      return;
    }
    run(free, take());
    dispatch();
  }

  return {
    inputWidth,
    outputWidth,
    infer(input, rows) {
      if (closed) return Promise.reject(new UnavailableError('inference pool is shutting down'));
      if (rows === 0) return Promise.resolve(new Float32Array(0));
      if (queued + rows > options.maxQueueRows) {
        return Promise.reject(
          new UnavailableError(
            `inference queue full (${queued} rows waiting, limit ${options.maxQueueRows})`,
          ),
        );
      }
      return new Promise((resolve, reject) => {
        (rows <= smallRows ? small : large).push({
          input,
          rows,
          since: performance.now(),
          resolve,
          reject,
        });
        queued += rows;
        dispatch();
      });
    },
    queuedRows: () => queued,
    async close() {
      closed = true;
      if (timer !== undefined) clearTimeout(timer);
      for (const pending of [...small.splice(0), ...large.splice(0)])
        pending.reject(new UnavailableError('inference pool closed'));
      await Promise.all(slots.map((slot) => slot.worker.terminate()));
    },
  };
}

export { createInferencePool };
export type { InferencePool, PoolOptions };
