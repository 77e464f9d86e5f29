/**
 * Inference off the HTTP thread: onnxruntime's `run` blocks the thread it runs on, so models run
 * in worker threads. Requests that arrive while a thread is busy, or in the same turn of the
 * event loop, are coalesced into one session run (dynamic batching along the first dimension, up
 * to `maxBatch` rows, optionally waiting `maxWaitMs` for more; inputs joined in the thread's
 * shared arena, arena.ts) when the model has an open first dimension, and only requests whose
 * other dimensions agree are joined (an image model with open height and width runs each size
 * apart).
 * A model without a batch dimension runs one request at a time. The queue is capped: past
 * `maxQueueRows` a request is refused at once with a retryable 503 instead of waiting without
 * bound; small requests go first (request-queue.ts), and while one waits, large requests' work
 * on the HTTP thread runs `largeTurnsApart` turns apart (turns.ts).
 *
 * What the pool guarantees on top:
 * - Every request settles by its deadline (`deadlineMs`, queued and running together): past it,
 *   a retryable 503. A run still going keeps its thread; its late answer is dropped.
 * - A thread that dies (an uncaught error, an exit, a terminate) is replaced, and the requests it
 *   held are answered at once with a retryable 503, never left waiting; the rest wait for a
 *   live thread. A replacement that fails to start, or a thread that dies before answering any
 *   run, doubles the pause before the next start (250 ms, 500 ms, ... up to 30 s): a model that
 *   crashes every thread does not spin. While no thread is alive and none is starting, requests
 *   are refused at once with a 503, and `health()` says so (the workers' readiness check).
 * - A joined run that fails is retried request by request, so only the request that causes the
 *   failure gets it: a 400 when onnxruntime's run refused that request alone (its input does not
 *   fit the model's graph: a shape a node cannot take, an index out of range), a 500 when the
 *   failure is not the input's (building the feeds or reading the outputs failed, or the run
 *   could not allocate memory).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { UnavailableError, ValidationError } from '../errors/index.js';
import { isParkedNotice, startOnnxWorker } from './onnx-runtime.js';
import type { FailureStage, OnnxThread, RunReply, WireTensor } from './onnx-runtime.js';
import { InputArena } from './arena.js';
import type { RunMessage } from './arena.js';
import { notFinite } from './finite.js';
import type { FiniteCheck, FiniteFault } from './finite.js';
import { createRequestQueue, smallRows } from './request-queue.js';
import type { Pending, RequestQueue, Tensors } from './request-queue.js';
import { sliceRows } from './tensor.js';
import { largeWork } from './turns.js';
import type { Signature } from './tensor.js';

/** What happened to a thread, for the log. */
type ThreadEvent =
  | { kind: 'died'; reason: string; heldRequests: number; restartInMs: number }
  | { kind: 'start-failed'; reason: string; restartInMs: number }
  | { kind: 'replaced'; alive: number };

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
  /** How long a request may wait for its answer, queued and running (default 5 s). */
  deadlineMs?: number;
  /**
   * While small requests wait here, large requests' pieces of work on the HTTP thread run only
   * every this many turns of the event loop (turns.ts; default 3, 1: every turn).
   */
  largeTurnsApart?: number;
  /** Called with the rows of each session run (batch-size metrics). */
  onRun?: (rows: number) => void;
  /** Told when a thread dies, fails to start or is replaced. */
  onThreadEvent?: (event: ThreadEvent) => void;
  /**
   * Chaos testing only: stops one thread (each in turn) every this many ms, as a terminate from
   * outside would (at the first moment the thread is outside onnxruntime; see OnnxThread.stop).
   */
  chaosStopEveryMs?: number;
  /** Starts one thread: startOnnxWorker, unless a test watches its threads. */
  startThread?: (model: Uint8Array) => Promise<OnnxThread>;
}

/** The threads as readiness sees them. */
interface PoolHealth {
  /** Threads configured. */
  threads: number;
  /** Threads alive. */
  alive: number;
  /** Alive and not stuck in one run for longer than the deadline. */
  serving: number;
  /** Replacements loading the model or waiting out their pause. */
  restarting: number;
  /** Why the last thread died or failed to start, when one did. */
  lastFailure: string | undefined;
}

interface InferencePool {
  readonly signature: Signature;
  /**
   * The model's outputs for one request, checked by the caller against the signature. `rows` is
   * the request's first dimension for a batched model, 1 otherwise. `unchecked` are inputs whose
   * finiteness the inference thread checks before the run (finite.ts): a value that is not
   * finite fails this request alone, with the 400 the parser would have given.
   */
  infer(
    inputs: Readonly<Tensors>,
    rows: number,
    unchecked?: readonly FiniteCheck[],
  ): Promise<Tensors>;
  /** Rows waiting for a worker. */
  queuedRows(): number;
  close(): Promise<void>;
}

/** The pool createInferencePool makes: its threads' health is what readiness reads. */
interface ServingPool extends InferencePool {
  health(): PoolHealth;
}

const defaultDeadlineMs = 5000;
const defaultLargeTurnsApart = 3;
/**
 * Small requests count as about for this long after the last one came: a caller of small ones
 * that is between two of them (its answer being written, its next request being read) is still
 * about.
 */
const smallSeenMs = 20;
/** How long `close` waits for session runs in progress, then for their threads to stop. */
const closeWaitMs = 10_000;
/** The pause before a replacement after `crashes` consecutive crashes. */
const restartDelay = (crashes: number) =>
  crashes === 0 ? 0 : Math.min(30_000, 250 * 2 ** (crashes - 1));
/** onnxruntime's words for a run that could not get memory: not the input's fault. */
const outOfMemory = /bad.alloc|failed to allocate|out of memory/i;

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

const stages: Readonly<Record<FailureStage, string>> = {
  input: 'building the feeds',
  run: 'running the model',
  output: 'reading the outputs',
};

/** The answer to a request whose run, alone, failed (see the file comment). */
function failure(request: Pending, reply: { error: string; stage: FailureStage }): Error {
  if (reply.stage === 'run' && !outOfMemory.test(reply.error)) return refused(request, reply.error);
  return new Error(`inference failed while ${stages[reply.stage]}: ${reply.error}`);
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

/** One thread and the run it holds. */
interface Slot {
  thread: OnnxThread;
  /** Where its runs' inputs are written (arena.ts). */
  arena: InputArena;
  /** The run in progress; undefined while the thread is idle. */
  run: { batch: Pending[]; started: number } | undefined;
  /** Runs it answered: a thread that answered one works, and its death is not a crash. */
  answered: number;
  dead: boolean;
}

const noInputs: Readonly<Tensors> = Object.freeze({});

class HealingPool implements ServingPool {
  private readonly slots: Slot[] = [];
  private readonly queue: RequestQueue;
  private readonly deadlineMs: number;
  private readonly inputNames: readonly string[];
  private readonly startThread: (model: Uint8Array) => Promise<OnnxThread>;
  /** Backoff timers of replacements not started yet. */
  private readonly pauses = new Set<NodeJS.Timeout>();
  /** The partial batch's wait (maxWaitMs). */
  private waiting: NodeJS.Timeout | undefined;
  /** A dispatch at the end of this turn of the event loop (see `infer`). */
  private turn: NodeJS.Immediate | undefined;
  private chaos: NodeJS.Timeout | undefined;
  private closed = false;
  /** Resolves close's wait once no run is in progress. */
  private onIdle: (() => void) | undefined;
  /**
   * Set when a joined run's outputs did not carry the batch along their first dimension, though
   * the metadata said they would (an output declared [N, ...] that is really [1, ...]): from
   * then on every request runs alone, as for a model without a batch dimension.
   */
  private unsplittable = false;
  /** Crashes since a thread last answered a run (restartDelay). */
  private crashes = 0;
  /** Replacements loading the model. */
  private starting = 0;
  /** Small requests (smallRows) not yet answered, queued or running. */
  private smallWaiting = 0;
  /** When the last small request came (performance.now()). */
  private smallSeen = -Infinity;
  private lastFailure: string | undefined;
  private unique = 0;
  private readonly uniqueKey = () => `alone:${(this.unique += 1)}`;
  /** Stops the HTTP thread's large work yielding to this pool's small requests. */
  private readonly unyield: () => void;

  constructor(
    readonly signature: Signature,
    threads: readonly OnnxThread[],
    private readonly options: PoolOptions,
  ) {
    this.queue = createRequestQueue(options.maxBatch);
    this.deadlineMs = options.deadlineMs ?? defaultDeadlineMs;
    this.inputNames = signature.inputs.map((spec) => spec.name);
    this.startThread = options.startThread ?? startOnnxWorker;
    for (const thread of threads) this.adopt(thread);
    this.unyield = largeWork.yieldTo({
      busy: () => this.smallWaiting > 0,
      turnsApart: options.largeTurnsApart ?? defaultLargeTurnsApart,
    });
    const every = options.chaosStopEveryMs ?? 0;
    if (every > 0) {
      let turn = 0;
      this.chaos = setInterval(() => {
        const slot = this.slots[turn++ % Math.max(1, this.slots.length)];
        if (slot !== undefined) void slot.thread.stop();
      }, every).unref();
    }
  }

  infer(
    inputs: Readonly<Tensors>,
    rows: number,
    unchecked?: readonly FiniteCheck[],
  ): Promise<Tensors> {
    if (this.closed) return Promise.reject(new UnavailableError('inference pool is shutting down'));
    if (!this.accepting()) return Promise.reject(this.noThread());
    if (this.queue.rows() + rows > this.options.maxQueueRows) {
      return Promise.reject(
        new UnavailableError(
          `inference queue full (${this.queue.rows()} rows waiting, limit ${this.options.maxQueueRows})`,
        ),
      );
    }
    const key =
      this.signature.batched && !this.unsplittable
        ? batchKey(this.signature, inputs)
        : this.uniqueKey();
    return new Promise((resolve, reject) => {
      const pending: Pending = {
        inputs,
        rows,
        unchecked: unchecked === undefined || unchecked.length === 0 ? undefined : unchecked,
        key,
        since: performance.now(),
        state: 'queued',
        deadline: undefined,
        resolve,
        reject,
      };
      pending.deadline = setTimeout(this.expire, this.deadlineMs, pending);
      if (rows <= smallRows) {
        this.smallWaiting += 1;
        this.smallSeen = pending.since;
      }
      this.queue.push(pending);
      // Dispatched once the loop has read what else arrived this turn: requests parsed in one
      // turn share a session run and one message each way instead of one per request (a
      // thread message costs the HTTP thread tens of microseconds, more than a small run).
      this.turn ??= setImmediate(this.endOfTurn);
    });
  }

  queuedRows(): number {
    return this.queue.rows();
  }

  health(): PoolHealth {
    const now = performance.now();
    const stuck = (slot: Slot) =>
      slot.run !== undefined && now - slot.run.started > this.deadlineMs;
    return {
      threads: this.options.threads,
      alive: this.slots.length,
      serving: this.slots.filter((slot) => !stuck(slot)).length,
      restarting: this.starting + this.pauses.size,
      lastFailure: this.lastFailure,
    };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.unyield();
    clearTimeout(this.waiting);
    clearImmediate(this.turn);
    clearInterval(this.chaos);
    for (const pause of this.pauses) clearTimeout(pause);
    this.pauses.clear();
    // Emptied now: a run finishing during the drain must not dispatch from the queues.
    for (const pending of this.queue.drain()) {
      this.settle(pending, new UnavailableError('inference pool closed'));
    }
    // Runs in progress answer first, for a bounded time (a stop would drop their answers).
    const idle = new Promise<void>((resolve) => (this.onIdle = resolve));
    this.checkIdle();
    await Promise.race([idle, sleep(closeWaitMs, undefined, { ref: false })]);
    await Promise.all(this.slots.map((slot) => slot.thread.stop(closeWaitMs)));
  }

  private readonly endOfTurn = () => {
    this.turn = undefined;
    this.dispatch();
  };

  /** Past its deadline: answered 503, wherever it is (a late run's answer is dropped). */
  private readonly expire = (pending: Pending) => {
    const where = pending.state === 'queued' ? 'waiting for a thread' : 'running';
    this.settle(
      pending,
      new UnavailableError(
        `no answer within the inference deadline of ${this.deadlineMs} ms (the request was ${where}); send it again`,
      ),
    );
  };

  /** Answers a request once; later outcomes (a late run, a dead thread) are dropped. */
  private settle(pending: Pending, outcome: Tensors | Error): void {
    if (pending.state === 'settled') return;
    if (pending.state === 'queued') this.queue.forget(pending);
    pending.state = 'settled';
    pending.inputs = noInputs;
    clearTimeout(pending.deadline);
    if (pending.rows <= smallRows) this.smallWaiting -= 1;
    if (outcome instanceof Error) pending.reject(outcome);
    // While small requests are about (one waits here, or one came within smallSeenMs), what
    // the caller does with a large answer (reading it, formatting it) takes its turn on the
    // HTTP thread (turns.ts): a run that answered four large requests does not read all four
    // before a small one's next step gets the thread. With no small request about, the turns
    // would only cost the large ones.
    else if (pending.rows > smallRows && this.smallAbout()) {
      void largeWork().then(() => pending.resolve(outcome));
    } else pending.resolve(outcome);
  }

  private smallAbout(): boolean {
    return this.smallWaiting > 0 || performance.now() - this.smallSeen < smallSeenMs;
  }

  /** Whether a request can wait: some thread is alive, or one is loading. */
  private accepting(): boolean {
    return this.slots.length > 0 || this.starting > 0;
  }

  private noThread(): UnavailableError {
    const pause = Math.max(1, Math.ceil(restartDelay(this.crashes) / 1000));
    return new UnavailableError(
      `no inference thread is alive (the next starts within ${pause} s; last failure: ${this.lastFailure ?? 'none'})`,
      pause,
    );
  }

  private adopt(thread: OnnxThread): void {
    const slot: Slot = {
      thread,
      arena: new InputArena(),
      run: undefined,
      answered: 0,
      dead: false,
    };
    this.slots.push(slot);
    thread.worker.on('message', (message: unknown) => this.replied(slot, message));
    thread.worker.on('error', (err: Error) => this.died(slot, `error: ${err.message}`));
    thread.worker.on('exit', (code: number) => this.died(slot, `exit code ${code}`));
  }

  private dispatch(): void {
    if (this.closed || this.waiting !== undefined || this.queue.rows() === 0) return;
    const free = this.slots.find((slot) => slot.run === undefined);
    if (free === undefined) return;
    // A partial batch may wait a little for more rows; a full one (or maxWaitMs 0) runs now.
    const { maxWaitMs, maxBatch } = this.options;
    if (
      maxWaitMs > 0 &&
      this.signature.batched &&
      !this.unsplittable &&
      this.queue.rows() < maxBatch
    ) {
      this.waiting = setTimeout(() => {
        this.waiting = undefined;
        const slot = this.slots.find((s) => s.run === undefined);
        if (!this.closed && slot !== undefined && this.queue.rows() > 0) {
          this.run(slot, this.queue.take());
        }
        this.dispatch();
      }, maxWaitMs);
      return;
    }
    this.run(free, this.queue.take());
    this.dispatch();
  }

  private run(slot: Slot, batch: Pending[]): void {
    this.options.onRun?.(batch.reduce((n, p) => n + p.rows, 0));
    for (const pending of batch) pending.state = 'running';
    slot.run = { batch, started: performance.now() };
    let message: RunMessage;
    try {
      // Joined into the thread's shared arena on the way: the message carries offsets only.
      message = slot.arena.pack(
        this.inputNames,
        batch.map((pending) => pending.inputs),
        batch.map((pending) => pending.unchecked),
      );
    } catch (err) {
      slot.run = undefined;
      this.deliver(batch, { error: String(err), stage: 'input' });
      return;
    }
    slot.thread.worker.postMessage(message);
  }

  private replied(slot: Slot, message: unknown): void {
    if (isParkedNotice(message) || slot.run === undefined) return;
    const { batch } = slot.run;
    slot.run = undefined;
    slot.answered += 1;
    this.crashes = 0;
    this.deliver(batch, message as RunReply);
    this.checkIdle();
    this.dispatch();
  }

  /** A run's reply to the requests still waiting for it (some may have passed their deadline). */
  private deliver(batch: readonly Pending[], reply: RunReply): void {
    const waiting = batch.filter((pending) => pending.state === 'running');
    if ('refused' in reply) {
      this.refuse(batch, reply.refused);
      return;
    }
    if ('error' in reply) {
      // Joined: which request failed it is unknown, so each runs again alone.
      if (batch.length > 1) this.retryAlone(waiting, false);
      else for (const pending of waiting) this.settle(pending, failure(pending, reply));
      return;
    }
    let parts: Tensors[];
    try {
      parts = split(reply.outputs, batch);
    } catch (err) {
      if (batch.length > 1) {
        this.unsplittable = true;
        this.retryAlone(waiting, true);
        return;
      }
      for (const pending of waiting) {
        this.settle(pending, new Error(`inference failed: ${(err as Error).message}`));
      }
      return;
    }
    batch.forEach((pending, i) => this.settle(pending, parts[i]!));
  }

  /**
   * A run the thread refused before running it: the requests with a value that is not finite
   * get their 400, the others go back to the front of the queue, as they were.
   */
  private refuse(batch: readonly Pending[], faults: readonly FiniteFault[]): void {
    for (const fault of faults) {
      const pending = batch[fault.request];
      if (pending === undefined || pending.state !== 'running') continue;
      const check = pending.unchecked?.find((c) => c.input === fault.input);
      const where = check?.where ?? `input ${fault.input}`;
      this.settle(pending, notFinite(where, fault.element, fault.value));
    }
    const rest = batch.filter((pending) => pending.state === 'running');
    for (const pending of rest) pending.state = 'queued';
    this.queue.requeue(rest);
  }

  private retryAlone(requests: readonly Pending[], everyone: boolean): void {
    for (const pending of requests) pending.state = 'queued';
    this.queue.requeueAlone(requests, this.uniqueKey, everyone);
  }

  /** A thread is gone: what it held is answered 503 now, and a replacement is on its way. */
  private died(slot: Slot, reason: string): void {
    if (slot.dead) return;
    slot.dead = true;
    this.slots.splice(this.slots.indexOf(slot), 1);
    const held = slot.run?.batch ?? [];
    slot.run = undefined;
    const gone = new UnavailableError(
      `the inference thread running this request stopped (${reason}); send it again`,
    );
    for (const pending of held) this.settle(pending, gone);
    this.checkIdle();
    if (this.closed) return;
    if (slot.answered === 0) this.crashes += 1;
    this.lastFailure = `a thread stopped (${reason})`;
    this.options.onThreadEvent?.({
      kind: 'died',
      reason,
      heldRequests: held.length,
      restartInMs: restartDelay(this.crashes),
    });
    this.replace();
  }

  /** Starts the missing threads, each after the current pause. */
  private replace(): void {
    const missing = this.options.threads - this.slots.length - this.starting - this.pauses.size;
    for (let i = 0; i < missing; i += 1) {
      const delay = restartDelay(this.crashes);
      if (delay === 0) {
        void this.startOne();
        continue;
      }
      const pause = setTimeout(() => {
        this.pauses.delete(pause);
        void this.startOne();
      }, delay);
      this.pauses.add(pause);
    }
    // Nothing alive and nothing loading: waiting would only run into the deadline.
    if (!this.accepting()) {
      const refusal = this.noThread();
      for (const pending of this.queue.drain()) this.settle(pending, refusal);
    }
  }

  private async startOne(): Promise<void> {
    if (this.closed) return;
    this.starting += 1;
    let thread: OnnxThread;
    try {
      thread = await this.startThread(this.options.model);
    } catch (err) {
      this.starting -= 1;
      if (this.closed) return;
      this.crashes += 1;
      const reason = err instanceof Error ? err.message : String(err);
      this.lastFailure = `a thread did not start (${reason})`;
      this.options.onThreadEvent?.({
        kind: 'start-failed',
        reason,
        restartInMs: restartDelay(this.crashes),
      });
      this.replace();
      return;
    }
    this.starting -= 1;
    if (this.closed) {
      await thread.stop(closeWaitMs);
      return;
    }
    this.adopt(thread);
    this.options.onThreadEvent?.({ kind: 'replaced', alive: this.slots.length });
    this.dispatch();
  }

  private checkIdle(): void {
    if (this.closed && this.slots.every((slot) => slot.run === undefined)) this.onIdle?.();
  }
}

async function createInferencePool(options: PoolOptions): Promise<ServingPool> {
  const start = options.startThread ?? startOnnxWorker;
  const started = await Promise.allSettled(
    Array.from({ length: options.threads }, () => start(options.model)),
  );
  const threads = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  const failures = started.flatMap((s) => (s.status === 'rejected' ? [s.reason as unknown] : []));
  if (failures.length > 0 || threads[0] === undefined) {
    // The others would keep the process alive.
    await Promise.all(threads.map((thread) => thread.stop(closeWaitMs)));
    const [first] = failures;
    throw first instanceof Error
      ? first
      : new Error(`no inference thread started: ${String(first)}`);
  }
  return new HealingPool(threads[0].signature, threads, options);
}

export { createInferencePool };
export type { InferencePool, PoolHealth, PoolOptions, ServingPool, Tensors, ThreadEvent };
