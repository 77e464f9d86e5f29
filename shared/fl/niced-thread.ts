/**
 * A worker thread at a lower CPU priority that answers calls, for the computations of federated
 * learning that must not hold up a process's messaging: a trainer's training, the aggregator's
 * evaluation. Linux applies a niceness to the calling thread alone, so the process's own thread
 * keeps its priority.
 *
 * The thread loads the module that asks for it (its URL, so the same code runs from the compiled
 * build and from the image's bundle, where it is a chunk); that module calls serveCalls at load
 * when workerData names its role. Each call has an id and its reply settles it; a thread that
 * errors or exits rejects every call in flight, and the next call starts another.
 */
import { setPriority } from 'node:os';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import type { Transferable } from 'node:worker_threads';
import type { Logger } from '../telemetry/index.js';

/** What the thread is started with. */
interface ThreadData {
  role: string;
  nice: number;
  data: unknown;
}

type Reply<Result> =
  | { kind: 'done'; id: number; result: Result }
  | { kind: 'failed'; id: number; code: number; message: string }
  | { kind: 'warning'; message: string };

interface Pending {
  resolve(result: never): void;
  reject(err: unknown): void;
}

const messageOf = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** This thread's start data when it was started for `role`, else undefined. */
function startedFor(role: string): { nice: number; data: unknown } | undefined {
  const started = workerData as Partial<ThreadData> | null;
  if (isMainThread || started?.role !== role) return undefined;
  return { nice: started.nice ?? 0, data: started.data };
}

/**
 * The thread's side: lowers this thread's priority to `nice`, then answers each call with
 * `handle`; an error becomes a failed reply with the code `failure` gives it.
 */
function serveCalls<Request, Result>(
  nice: number,
  handle: (request: Request) => Promise<{ result: Result; transfer?: Transferable[] }>,
  failure: (err: unknown) => { code: number; message: string },
): void {
  const port = parentPort;
  if (port === null) throw new Error('serveCalls runs on a worker thread');
  try {
    setPriority(0, nice);
  } catch (err) {
    port.postMessage({ kind: 'warning', message: `niceness ${nice}: ${messageOf(err)}` });
  }
  port.on('message', ({ id, request }: { id: number; request: Request }) => {
    handle(request).then(
      ({ result, transfer }) => {
        const reply: Reply<Result> = { kind: 'done', id, result };
        port.postMessage(reply, transfer);
      },
      (err: unknown) => {
        const reply: Reply<Result> = { kind: 'failed', id, ...failure(err) };
        port.postMessage(reply);
      },
    );
  });
}

interface NicedThread<Request, Result> {
  /**
   * `request` answered by the thread (started if none runs). Aborting `signal` terminates the
   * thread (pure JavaScript stops at once; the next call starts another) and rejects with its
   * reason.
   */
  call(
    request: Request,
    options?: { signal?: AbortSignal; transfer?: Transferable[] },
  ): Promise<Result>;
  /** Starts the thread now if none runs (what it does as it starts is its module's). */
  start(): void;
  close(): Promise<void>;
}

/**
 * The caller's side: a thread running `moduleUrl` for `role` at niceness `nice`, started on first
 * use and again after it died. `failure` turns a failed reply's code and message, or the thread's
 * death (no code), into the error its calls reject with.
 */
function nicedThread<Request, Result>(options: {
  moduleUrl: string;
  role: string;
  nice: number;
  data: unknown;
  name: string;
  log: Logger;
  failure: (code: number | undefined, message: string) => Error;
}): NicedThread<Request, Result> {
  const { log, failure, name } = options;
  let thread: { worker: Worker; pending: Map<number, Pending> } | undefined;
  let nextId = 0;

  const start = () => {
    const pending = new Map<number, Pending>();
    // Loading the module is enough: it serves when it finds its role in workerData.
    const code = `import(${JSON.stringify(options.moduleUrl)})`;
    const data: ThreadData = { role: options.role, nice: options.nice, data: options.data };
    const worker = new Worker(code, { eval: true, workerData: data });
    worker.unref();
    const mine = { worker, pending };
    const failAll = (err: Error) => {
      if (thread === mine) thread = undefined;
      for (const p of pending.values()) p.reject(err);
      pending.clear();
    };
    worker.on('message', (reply: Reply<Result>) => {
      if (reply.kind === 'warning') return log.warn({ reason: reply.message }, name);
      const waiting = pending.get(reply.id);
      pending.delete(reply.id);
      if (reply.kind === 'done') waiting?.resolve(reply.result as never);
      else waiting?.reject(failure(reply.code, reply.message));
    });
    worker.on('error', (err) => {
      log.error({ err }, `the ${name} failed`);
      failAll(failure(undefined, `the ${name} failed: ${err.message}`));
    });
    worker.on('exit', (exitCode) =>
      failAll(failure(undefined, `the ${name} exited (${exitCode})`)),
    );
    thread = mine;
    return mine;
  };

  return {
    call(request, { signal, transfer } = {}) {
      signal?.throwIfAborted();
      const current = thread ?? start();
      const id = (nextId += 1);
      return new Promise<Result>((resolve, reject) => {
        const onAbort = () => {
          current.pending.delete(id);
          if (thread === current) thread = undefined;
          void current.worker.terminate();
          const reason: unknown = signal?.reason;
          reject(reason instanceof Error ? reason : new Error(String(reason)));
        };
        signal?.addEventListener('abort', onAbort, { once: true });
        const settle =
          <T>(fn: (value: T) => void) =>
          (value: T) => {
            signal?.removeEventListener('abort', onAbort);
            fn(value);
          };
        current.pending.set(id, { resolve: settle(resolve), reject: settle(reject) });
        current.worker.postMessage({ id, request }, transfer);
      });
    },
    start() {
      thread ??= start();
    },
    async close() {
      const current = thread;
      thread = undefined;
      await current?.worker.terminate();
    },
  };
}

export { nicedThread, serveCalls, startedFor };
export type { NicedThread };
