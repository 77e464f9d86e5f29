/**
 * Inference off the HTTP thread: onnxruntime's `run` blocks the thread it runs on, so models run
 * in worker threads. Requests that arrive while a worker is busy are coalesced into one session
 * run (dynamic batching along the first dimension, up to `maxBatch` rows, optionally waiting
 * `maxWaitMs` for more) when the model has an open first dimension, and only requests whose other
 * dimensions agree are joined (an image model with open height and width runs each size apart).
 * A model without a batch dimension runs one request at a time. The queue is capped: past
 * `maxQueueRows` a request is refused at once with a retryable 503 instead of waiting without
 * bound. Small requests go first: a batch-of-one caller should not wait behind queued batches of
 * hundreds, while a large batch hardly notices a few rows ahead of it. A large request that has
 * waited `agingMs` goes first in turn, so a stream of small ones cannot starve it.
 */
import type { Worker } from 'node:worker_threads';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { UnavailableError, ValidationError } from '../errors/index.js';
import { startOnnxWorker } from './onnx-runtime.js';
import type { RunReply, WireTensor } from './onnx-runtime.js';
import { sliceRows } from './tensor.js';
import type { Signature, Tensor } from './tensor.js';

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

type Tensors = Record<string, Tensor>;

interface InferencePool {
  readonly signature: Signature;
  /**
   * The model's outputs for one request, checked by the caller against the signature. `rows` is
   * the request's first dimension for a batched model, 1 otherwise.
   */
  infer(inputs: Readonly<Tensors>, rows: number): Promise<Tensors>;
  /** Rows waiting for a worker. */
  queuedRows(): number;
  close(): Promise<void>;
}

/** How long `close` waits for session runs in progress. */
const closeWaitMs = 10_000;

/**
 * A session run that failed on inputs that passed the signature check: the model's own
 * constraints (a detector needing sides that are multiples of 32) are the caller's to meet, so a
 * 400 with onnxruntime's reason and the shapes sent, as Triton answers, not a bare 500.
 */
function refused(request: Pending, reason: string): ValidationError {
  const shapes = Object.entries(request.inputs)
    .map(([name, tensor]) => `${name} ${JSON.stringify(tensor.shape)}`)
    .join(', ');
  const why = reason.replace(/\s+/g, ' ').slice(0, 500);
  return new ValidationError(`the model could not run on these inputs (${shapes}): ${why}`);
}

/** Requests of at most this many rows are served before larger ones. */
const smallRows = 8;
/** A large request waiting this long is served before small ones. */
const agingMs = 20;

interface Pending {
  inputs: Readonly<Tensors>;
  rows: number;
  /** Requests with the same key may share a session run. */
  key: string;
  since: number;
  resolve(output: Tensors): void;
  reject(err: Error): void;
}

interface Slot {
  worker: Worker;
  busy: boolean;
  batch: Pending[];
}

/** What must agree for two requests to be joined: each input's datatype and trailing dimensions. */
function batchKey(signature: Signature, inputs: Readonly<Tensors>): string {
  let key = '';
  for (const spec of signature.inputs) {
    const tensor = inputs[spec.name];
    key += `${tensor?.datatype}:${tensor?.shape.slice(1).join('x')};`;
  }
  return key;
}

/** Splits one run's outputs back into its requests, along the first dimension. */
function split(outputs: Record<string, WireTensor>, batch: readonly Pending[]): Tensors[] {
  if (batch.length === 1) return [outputs];
  const total = batch.reduce((n, p) => n + p.rows, 0);
  for (const [name, tensor] of Object.entries(outputs)) {
    if (tensor.shape[0] !== total) {
      throw new Error(
        `output ${name} has first dimension ${tensor.shape[0]} for a batch of ${total} rows`,
      );
    }
  }
  let offset = 0;
  return batch.map((pending) => {
    const own: Tensors = {};
    for (const [name, tensor] of Object.entries(outputs)) {
      own[name] = sliceRows(tensor, offset, offset + pending.rows);
    }
    offset += pending.rows;
    return own;
  });
}

/**
 * The requests waiting for a worker, in two queues: small requests go first unless the oldest
 * large one has waited `agingMs` (see the file comment). A batch takes the head's key only.
 */
function createRequestQueue(maxBatch: number) {
  const small: Pending[] = [];
  const large: Pending[] = [];
  let rows = 0;
  const queueOf = (pending: Pending) => (pending.rows <= smallRows ? small : large);

  /** Takes from `queue` the requests that share `key`, while they fit. */
  function takeMatching(queue: Pending[], key: string, batch: Pending[], taken: number): number {
    for (let i = 0; i < queue.length;) {
      const next = queue[i]!;
      if (next.key !== key) {
        i += 1;
        continue;
      }
      if (batch.length > 0 && taken + next.rows > maxBatch) break;
      queue.splice(i, 1);
      batch.push(next);
      taken += next.rows;
      rows -= next.rows;
    }
    return taken;
  }

  return {
    /** Rows waiting. */
    rows: () => rows,
    push(pending: Pending): void {
      queueOf(pending).push(pending);
      rows += pending.rows;
    },
    /** The next batch: the head request and those that may join it. */
    take(): Pending[] {
      const oldest = large[0];
      const order =
        oldest !== undefined && performance.now() - oldest.since >= agingMs
          ? [large, small]
          : [small, large];
      const head = order[0]![0] ?? order[1]![0]!;
      const batch: Pending[] = [];
      let taken = 0;
      for (const queue of order) taken = takeMatching(queue, head.key, batch, taken);
      return batch;
    },
    /** Puts `batch` back at the front, and gives every waiting request a key of its own. */
    requeueAlone(batch: readonly Pending[], uniqueKey: () => string): void {
      for (const pending of [...batch].reverse()) {
        queueOf(pending).unshift(pending);
        rows += pending.rows;
      }
      for (const pending of [...small, ...large]) pending.key = uniqueKey();
    },
    /** Empties both queues, returning what was in them. */
    drain(): Pending[] {
      rows = 0;
      return [...small.splice(0), ...large.splice(0)];
    },
  };
}

function rejectAll(batch: readonly Pending[], err: Error): void {
  for (const pending of batch) pending.reject(err);
}

/**
 * A reply's outputs to their requests. Returns false when a joined run's outputs cannot be split
 * along the batch: the caller runs its requests again, each alone.
 */
function deliver(batch: readonly Pending[], message: RunReply): boolean {
  if ('error' in message) {
    rejectAll(batch, refused(batch[0]!, message.error));
    return true;
  }
  let parts: Tensors[];
  try {
    parts = split(message.outputs, batch);
  } catch (err) {
    if (batch.length > 1) return false;
    rejectAll(batch, new Error(`inference failed: ${(err as Error).message}`));
    return true;
  }
  parts.forEach((outputs, i) => batch[i]!.resolve(outputs));
  return true;
}

/** Each worker's session run: the batch it holds, settled when its reply comes. */
function watchSlot(slot: Slot, settle: (batch: Pending[], reply: RunReply) => void): void {
  slot.worker.on('message', (message: RunReply) => {
    const batch = slot.batch;
    slot.batch = [];
    slot.busy = false;
    settle(batch, message);
  });
  slot.worker.on('error', (err) => {
    rejectAll(slot.batch, err);
    slot.batch = [];
    slot.busy = false;
  });
}

async function createInferencePool(options: PoolOptions): Promise<InferencePool> {
  const started = await Promise.all(
    Array.from({ length: options.threads }, () => startOnnxWorker(options.model)),
  );
  const { signature } = started[0]!;
  const slots: Slot[] = started.map(({ worker }) => ({ worker, busy: false, batch: [] }));
  const queue = createRequestQueue(options.maxBatch);
  let unique = 0;
  const uniqueKey = () => `alone:${(unique += 1)}`;
  let timer: NodeJS.Timeout | undefined;
  let closed = false;
  /**
   * Set when a joined run's outputs did not carry the batch along their first dimension, though
   * the metadata said they would (an output declared [N, ...] that is really [1, ...]): from
   * then on every request runs alone, as for a model without a batch dimension.
   */
  let unsplittable = false;

  const settle = (batch: Pending[], message: RunReply) => {
    if (!deliver(batch, message)) {
      unsplittable = true;
      queue.requeueAlone(batch, uniqueKey);
    }
    dispatch();
  };
  for (const slot of slots) watchSlot(slot, settle);

  function run(slot: Slot, batch: Pending[]): void {
    options.onRun?.(batch.reduce((n, p) => n + p.rows, 0));
    slot.busy = true;
    slot.batch = batch;
    // Posting copies each input once (as joining them here would); the worker joins them into
    // one tensor per input on its own thread.
    slot.worker.postMessage({ requests: batch.map((pending) => pending.inputs) });
  }

  function dispatch(): void {
    if (timer !== undefined || queue.rows() === 0) return;
    const free = slots.find((slot) => !slot.busy);
    if (free === undefined) return;
    // A partial batch may wait a little for more rows; a full one (or maxWaitMs 0) runs now.
    if (
      options.maxWaitMs > 0 &&
      signature.batched &&
      !unsplittable &&
      queue.rows() < options.maxBatch
    ) {
      timer = setTimeout(() => {
        timer = undefined;
        const slot = slots.find((s) => !s.busy);
        if (slot !== undefined && queue.rows() > 0) run(slot, queue.take());
        dispatch();
      }, options.maxWaitMs);
      return;
    }
    run(free, queue.take());
    dispatch();
  }

  return {
    signature,
    infer(inputs, rows) {
      if (closed) return Promise.reject(new UnavailableError('inference pool is shutting down'));
      if (queue.rows() + rows > options.maxQueueRows) {
        return Promise.reject(
          new UnavailableError(
            `inference queue full (${queue.rows()} rows waiting, limit ${options.maxQueueRows})`,
          ),
        );
      }
      const key = signature.batched && !unsplittable ? batchKey(signature, inputs) : uniqueKey();
      return new Promise((resolve, reject) => {
        queue.push({ inputs, rows, key, since: performance.now(), resolve, reject });
        dispatch();
      });
    },
    queuedRows: () => queue.rows(),
    async close() {
      closed = true;
      if (timer !== undefined) clearTimeout(timer);
      // Emptied now: a run finishing during the drain must not dispatch from the queues.
      rejectAll(queue.drain(), new UnavailableError('inference pool closed'));
      // Terminating a thread inside onnxruntime's run aborts the whole process (a native
      // exception escapes): let the runs in progress finish first, for a bounded time.
      const running = slots.filter((slot) => slot.busy).map((slot) => once(slot.worker, 'message'));
      await Promise.race([Promise.all(running), sleep(closeWaitMs, undefined, { ref: false })]);
      await Promise.all(slots.map((slot) => slot.worker.terminate()));
    },
  };
}

export { createInferencePool };
export type { InferencePool, PoolOptions, Tensors };
