/**
 * The requests waiting for an inference thread, in two queues: small requests go first unless
 * the oldest large one has waited `agingMs`, so a batch-of-one caller does not wait behind
 * queued batches of hundreds while a stream of small ones cannot starve a large one. A batch
 * takes the head's key only, and a small head takes small requests only (a large head takes
 * small ones along). A request answered while queued (its deadline passed, the pool
 * closed) stops counting at once (`forget`) and is dropped when a `take` reaches it.
 */
import type { FiniteCheck } from './finite.js';
import type { Tensor } from './tensor.js';

type Tensors = Record<string, Tensor>;

/** One request in the pool, answered once (`state` turns `settled`). */
interface Pending {
  /** Emptied once answered: a dropped entry still in a queue holds no tensors. */
  inputs: Readonly<Tensors>;
  rows: number;
  /** Inputs the thread checks for finiteness before the run (finite.ts). */
  unchecked: readonly FiniteCheck[] | undefined;
  /** Requests with the same key may share a session run. */
  key: string;
  since: number;
  state: 'queued' | 'running' | 'settled';
  /** Its deadline's timer, cleared once answered. */
  deadline: NodeJS.Timeout | undefined;
  resolve(output: Tensors): void;
  reject(err: Error): void;
}

/** Requests of at most this many rows are served before larger ones. */
const smallRows = 8;
/** A large request waiting this long is served before small ones. */
const agingMs = 20;

interface RequestQueue {
  /** Rows waiting (of requests still queued). */
  rows(): number;
  push(pending: Pending): void;
  /** A queued request was answered elsewhere: its rows no longer wait. */
  forget(pending: Pending): void;
  /** The next batch: the head request and those that may join it (call only when rows() > 0). */
  take(): Pending[];
  /** Puts `batch` back at the front, as it was (its requests may be joined again). */
  requeue(batch: readonly Pending[]): void;
  /**
   * Puts `batch` back at the front, each request with a key of its own so that it runs alone;
   * with `everyone`, every waiting request too (and those keys are the caller's from then on).
   */
  requeueAlone(batch: readonly Pending[], uniqueKey: () => string, everyone: boolean): void;
  /**
   * Empties both queues, returning the requests still queued: they count in `rows` until the
   * caller answers each and `forget`s it.
   */
  drain(): Pending[];
}

function createRequestQueue(maxBatch: number): RequestQueue {
  const small: Pending[] = [];
  const large: Pending[] = [];
  let rows = 0;
  const queueOf = (pending: Pending) => (pending.rows <= smallRows ? small : large);
  /** Drops answered requests from the head of `queue`. */
  const trim = (queue: Pending[]) => {
    while (queue.length > 0 && queue[0]!.state !== 'queued') queue.shift();
  };

  /** Takes from `queue` the requests that share `key`, while they fit. */
  function takeMatching(queue: Pending[], key: string, batch: Pending[], taken: number): number {
    for (let i = 0; i < queue.length;) {
      const next = queue[i]!;
      if (next.state !== 'queued') {
        queue.splice(i, 1);
        continue;
      }
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
    rows: () => rows,
    push(pending) {
      queueOf(pending).push(pending);
      rows += pending.rows;
    },
    forget(pending) {
      rows -= pending.rows;
      // Nothing is queued any more: what the arrays hold is answered, and goes now.
      if (rows === 0) {
        small.length = 0;
        large.length = 0;
      }
    },
    take() {
      trim(small);
      trim(large);
      const oldest = large[0];
      const order =
        oldest !== undefined && performance.now() - oldest.since >= agingMs
          ? [large, small]
          : [small, large];
      const head = order[0]![0] ?? order[1]![0]!;
      // A small head runs with small requests only: joined with large ones, it would wait for
      // their rows to run too.
      const from = head.rows <= smallRows ? [small] : order;
      const batch: Pending[] = [];
      let taken = 0;
      for (const queue of from) taken = takeMatching(queue, head.key, batch, taken);
      return batch;
    },
    requeue(batch) {
      for (const pending of [...batch].reverse()) {
        queueOf(pending).unshift(pending);
        rows += pending.rows;
      }
    },
    requeueAlone(batch, uniqueKey, everyone) {
      for (const pending of [...batch].reverse()) {
        pending.key = uniqueKey();
        queueOf(pending).unshift(pending);
        rows += pending.rows;
      }
      if (everyone) for (const pending of [...small, ...large]) pending.key = uniqueKey();
    },
    drain() {
      return [...small.splice(0), ...large.splice(0)].filter((p) => p.state === 'queued');
    },
  };
}

export { createRequestQueue, smallRows };
export type { Pending, RequestQueue, Tensors };
