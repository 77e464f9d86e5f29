/**
 * The only file that loads onnxruntime-node. A model is loaded from bytes (checked by the
 * caller); its signature (names, datatypes, shapes with -1 for open dimensions) comes from the
 * session's metadata, never from assumptions about what models look like. `run` is synchronous
 * native work that blocks the event loop of the thread it runs on: the serving path runs models
 * in worker threads (startOnnxWorker, used by the inference pool), never on the HTTP thread.
 *
 * onnxruntime-node is loaded when first needed (`onnxruntime()`), not when this file is
 * imported: the serving path's HTTP thread never loads it (only its threads do), and a worker's
 * first thread can start, and load onnxruntime, while the function's own modules are still
 * loading (prestartOnnxThread, called by bin/serve.ts): the slowest parts of a worker's start (a
 * thread's Node environment, onnxruntime's native library) then overlap instead of following
 * each other.
 */
import { createRequire } from 'node:module';
import { setTimeout as sleep } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import type * as Ort from 'onnxruntime-node';
import type { InferenceSession, Tensor as OrtTensor } from 'onnxruntime-node';
import type { RunMessage } from './arena.js';
import type { FiniteFault } from './finite.js';
import { isDatatype } from './tensor.js';
import type { Datatype, Signature, Tensor, TensorSpec } from './tensor.js';

/** OIP datatype names and onnxruntime's, both ways. */
const ortTypes: Readonly<Record<Datatype, Ort.Tensor.Type>> = {
  BOOL: 'bool',
  UINT8: 'uint8',
  UINT16: 'uint16',
  UINT32: 'uint32',
  UINT64: 'uint64',
  INT8: 'int8',
  INT16: 'int16',
  INT32: 'int32',
  INT64: 'int64',
  FP16: 'float16',
  FP32: 'float32',
  FP64: 'float64',
  BYTES: 'string',
};
const oipTypes = new Map(Object.entries(ortTypes).map(([oip, ort]) => [ort as string, oip]));
/** The array class of each fixed-size datatype, by name (for the worker threads). */
const arrayNames: Readonly<Record<Exclude<Datatype, 'BYTES'>, string>> = {
  BOOL: 'Uint8Array',
  UINT8: 'Uint8Array',
  UINT16: 'Uint16Array',
  UINT32: 'Uint32Array',
  UINT64: 'BigUint64Array',
  INT8: 'Int8Array',
  INT16: 'Int16Array',
  INT32: 'Int32Array',
  INT64: 'BigInt64Array',
  FP16: 'Uint16Array',
  FP32: 'Float32Array',
  FP64: 'Float64Array',
};

const requireHere = createRequire(import.meta.url);
let loaded: typeof Ort | undefined;
/** onnxruntime-node, loaded on first use (see the file comment). */
function onnxruntime(): typeof Ort {
  loaded ??= requireHere('onnxruntime-node') as typeof Ort;
  return loaded;
}

const sessionOptions: InferenceSession.SessionOptions = {
  intraOpNumThreads: 1,
  interOpNumThreads: 1,
  executionMode: 'sequential',
  graphOptimizationLevel: 'all',
};

/** One metadata entry as a TensorSpec; a non-tensor value (sequence, map) is refused. */
function specOf(meta: InferenceSession.ValueMetadata, what: string): TensorSpec {
  if (!meta.isTensor) {
    throw new Error(`${what} ${meta.name} is not a tensor (sequences and maps are not served)`);
  }
  const datatype = oipTypes.get(meta.type);
  if (datatype === undefined || !isDatatype(datatype)) {
    throw new Error(`${what} ${meta.name} has datatype ${meta.type}, which is not served`);
  }
  const shape = meta.shape.map((d) => (typeof d === 'number' && d >= 0 ? d : -1));
  return { name: meta.name, datatype, shape };
}

/** A model's signature from its session's metadata. */
function signatureOf(session: {
  inputMetadata: readonly InferenceSession.ValueMetadata[];
  outputMetadata: readonly InferenceSession.ValueMetadata[];
}): Signature {
  const inputs = session.inputMetadata.map((m) => specOf(m, 'input'));
  const outputs = session.outputMetadata.map((m) => specOf(m, 'output'));
  if (inputs.length === 0 || outputs.length === 0) throw new Error('model has no input or output');
  const open = (spec: TensorSpec) => spec.shape.length >= 1 && spec.shape[0] === -1;
  return { inputs, outputs, batched: inputs.every(open) && outputs.every(open) };
}

function toOrt(tensor: Tensor): OrtTensor {
  return new (onnxruntime().Tensor)(
    ortTypes[tensor.datatype] as 'float32',
    tensor.data as Float32Array,
    tensor.shape,
  );
}

function fromOrt(value: Ort.Tensor): Tensor {
  const datatype = oipTypes.get(value.type);
  if (datatype === undefined || !isDatatype(datatype)) {
    throw new Error(`the model gave datatype ${value.type}, which is not served`);
  }
  return { datatype, shape: [...value.dims], data: value.data };
}

/** A model run in-process: for tools, benchmarks and tests, not the serving path. */
interface OnnxSession {
  readonly signature: Signature;
  run(inputs: Readonly<Record<string, Tensor>>): Promise<Record<string, Tensor>>;
  close(): Promise<void>;
}

async function openOnnxModel(
  bytes: Uint8Array,
  options: { threads?: number } = {},
): Promise<OnnxSession> {
  const session = await onnxruntime().InferenceSession.create(bytes, {
    ...sessionOptions,
    intraOpNumThreads: options.threads ?? 1,
  });
  const signature = signatureOf(session);
  return {
    signature,
    async run(inputs) {
      const feeds: Record<string, OrtTensor> = {};
      for (const [name, tensor] of Object.entries(inputs)) feeds[name] = toOrt(tensor);
      const result = await session.run(feeds);
      const out: Record<string, Tensor> = {};
      for (const [name, value] of Object.entries(result)) out[name] = fromOrt(value);
      return out;
    },
    close: () => session.release(),
  };
}

/** A [N, width] -> [N, width'] FP32 model as a matrix function (ASET's Q-network, calibration). */
interface OnnxModel {
  /** Features per sample. */
  readonly inputWidth: number;
  /** Outputs per sample. */
  readonly outputWidth: number;
  /** Runs `batch` samples (`input.length === batch * inputWidth`). */
  run(input: Float32Array, batch: number): Promise<Float32Array>;
  close(): Promise<void>;
}

async function loadOnnxModel(
  bytes: Uint8Array,
  options: { threads?: number } = {},
): Promise<OnnxModel> {
  const model = await openOnnxModel(bytes, options);
  const [input] = model.signature.inputs;
  const [output] = model.signature.outputs;
  const widthOf = (spec: TensorSpec | undefined) => {
    const width = spec?.shape[1];
    if (spec?.datatype !== 'FP32' || spec.shape.length !== 2 || width === undefined || width < 0)
      throw new Error(`expected FP32 [N, width], got ${JSON.stringify(spec)}`);
    return width;
  };
  const inputWidth = widthOf(input);
  const outputWidth = widthOf(output);
  return {
    inputWidth,
    outputWidth,
    async run(data, batch) {
      const result = await model.run({
        [input!.name]: { datatype: 'FP32', shape: [batch, inputWidth], data },
      });
      return result[output!.name]!.data as Float32Array;
    },
    close: () => model.close(),
  };
}

/** A tensor as it crosses to and from a worker thread: the OIP datatype, dims and elements. */
interface WireTensor {
  datatype: Datatype;
  shape: readonly number[];
  data: Tensor['data'];
}

/**
 * Where a failed run failed: building the feeds from the requests (`input`), onnxruntime's
 * `run` itself (`run`), or reading its outputs (`output`). Only `run` can be the caller's fault:
 * the requests reached the thread checked against the signature, so a failure around the run is
 * this server's (or the model's outputs').
 */
type FailureStage = 'input' | 'run' | 'output';

/**
 * A thread's answer to a run: its outputs; why it failed; or, not run, the values that are not
 * finite in the ranges the requests left to it (finite.ts), one per request and input.
 */
type RunReply =
  | { outputs: Record<string, WireTensor> }
  | { error: string; stage: FailureStage }
  | { refused: FiniteFault[] };

/**
 * A thread's state, shared with it in one Int32 (Atomics): the thread is `busy` while it loads
 * the model or is inside a session run, `idle` otherwise. `stop` asks it to end: it parks at the
 * first moment it is outside onnxruntime (`parked`), where terminating it is safe. Terminating a
 * thread inside onnxruntime's native code aborts the whole process: the N-API binding throws a
 * C++ exception it can no longer deliver (`terminate called after throwing an instance of
 * 'Napi::Error'`).
 */
const gateStates = { idle: 0, busy: 1, stop: 2, parked: 3 } as const;

/** A tensor as the worker thread handles it (the datatype in OIP's name). */
type Wire = { datatype: string; shape: readonly number[]; data: ArrayLike<unknown> };

/** The thread's memory for a run's inputs: the shared arena, and its own copy of it. */
interface Held {
  arena: SharedArrayBuffer | undefined;
  own: ArrayBuffer;
}

/**
 * A run's inputs from its message (in the worker; arena.ts has the layout): the arena's bytes
 * copied into the thread's own memory (onnxruntime refuses shared memory), grown by doubling
 * and kept up to 64 MB, each fixed-size input viewed there as its datatype's array (`arrays`:
 * the array class's name by datatype); strings as they came.
 */
function arenaInputs(
  message: RunMessage,
  held: Held,
  arrays: Readonly<Record<string, string>>,
): Array<Wire & { name: string }> {
  if (message.arena !== undefined) held.arena = message.arena;
  type Typed = new (buffer: ArrayBuffer, offset: number, length: number) => ArrayLike<unknown>;
  const arrayOf = (datatype: string) =>
    (globalThis as unknown as Record<string, Typed & { BYTES_PER_ELEMENT: number }>)[
      arrays[datatype]!
    ]!;
  let bytes = 0;
  for (const input of message.inputs) {
    if ('offset' in input) {
      const end = input.offset + input.length * arrayOf(input.datatype).BYTES_PER_ELEMENT;
      bytes = Math.max(bytes, end);
    }
  }
  let own = held.own;
  if (own.byteLength < bytes) {
    own = new ArrayBuffer(2 ** Math.ceil(Math.log2(Math.max(bytes, 1 << 16))));
    if (own.byteLength <= 64 << 20) held.own = own;
  }
  if (bytes > 0) new Uint8Array(own, 0, bytes).set(new Uint8Array(held.arena!, 0, bytes));
  // An arena too large to keep (arena.ts) served this run alone.
  if (held.arena !== undefined && held.arena.byteLength > 64 << 20) held.arena = undefined;
  return message.inputs.map(({ name, datatype, shape, ...at }) => ({
    name,
    datatype,
    shape,
    data: 'strings' in at ? at.strings : new (arrayOf(datatype))(own, at.offset, at.length),
  }));
}

/**
 * The values of a run's inputs that are not finite, in the ranges its requests left to the
 * thread (arena.ts `finite`): for each request and input, its first such element. In the worker,
 * on the thread's own copy of the inputs (`inputs`, in the message's order). Self-contained (it
 * is sent as source, see workerMain): the summation is finite.ts's `allFinite`, written out.
 */
function finiteFaults(
  message: RunMessage,
  inputs: ReadonlyArray<{ data: ArrayLike<unknown> }>,
): FiniteFault[] {
  const faults: FiniteFault[] = [];
  message.inputs.forEach((input, j) => {
    const ranges = 'finite' in input ? input.finite : undefined;
    if (ranges === undefined) return;
    const values = inputs[j]!.data as ArrayLike<number>;
    for (let r = 0; r < ranges.length; r += 3) {
      const start = ranges[r + 1]!;
      const end = start + ranges[r + 2]!;
      let s0 = 0;
      let s1 = 0;
      let s2 = 0;
      let s3 = 0;
      let i = start;
      for (; i + 4 <= end; i += 4) {
        s0 += values[i]!;
        s1 += values[i + 1]!;
        s2 += values[i + 2]!;
        s3 += values[i + 3]!;
      }
      for (; i < end; i += 1) s0 += values[i]!;
      if (Number.isFinite(s0 + s1 + s2 + s3)) continue;
      // A sum of finite FP64 values can overflow: only a value that is not finite is a fault.
      for (let k = start; k < end; k += 1) {
        if (Number.isFinite(values[k]!)) continue;
        faults.push({
          request: ranges[r]!,
          input: input.name,
          element: k - start,
          value: values[k]!,
        });
        break;
      }
    }
  });
  return faults;
}

/**
 * A run's outputs as posted back (in the worker): each in a buffer of its own, to transfer
 * rather than copy, with OIP's datatype names (`oip`: onnxruntime's type to OIP's); `keep` is
 * never transferred.
 */
function outputWires(
  result: Record<string, { type: string; dims: readonly number[]; data: ArrayLike<unknown> }>,
  oip: ReadonlyMap<string, string>,
  keep: ArrayBuffer,
): { outputs: Record<string, Wire>; transfer: ArrayBuffer[] } {
  const outputs: Record<string, Wire> = {};
  const transfer: ArrayBuffer[] = [];
  for (const [name, value] of Object.entries(result)) {
    let data = value.data;
    if (!Array.isArray(data)) {
      const view = data as Float32Array;
      // A view into a larger buffer cannot be transferred without sending the rest along.
      // Nor the thread's own input memory, should an output be a view of it.
      const whole = view.byteOffset === 0 && view.byteLength === view.buffer.byteLength;
      data = whole && view.buffer !== keep ? view : view.slice();
      transfer.push((data as Float32Array).buffer as ArrayBuffer);
    }
    outputs[name] = { datatype: oip.get(value.type) ?? value.type, shape: value.dims, data };
  }
  return { outputs, transfer };
}

/**
 * A run's feeds (in the worker): its inputs from the arena (arenaInputs), checked for finiteness
 * where its requests asked (finiteFaults), as onnxruntime's tensors; or the reply that ends the
 * run here, its faults or why the feeds could not be made. Self-contained, sent as source.
 */
function runFeeds(
  message: RunMessage,
  held: Held,
  thread: { ort: typeof Ort; types: Record<string, string>; arrays: Record<string, string> },
  helpers: Pick<WorkerHelpers, 'inputsOf' | 'faultsOf'>,
): { feeds: Record<string, Ort.Tensor> } | { end: RunReply } {
  try {
    const inputs = helpers.inputsOf(message, held, thread.arrays);
    const refused = helpers.faultsOf(message, inputs);
    if (refused.length > 0) return { end: { refused } };
    const feeds: Record<string, Ort.Tensor> = {};
    for (const { name, datatype, data, shape } of inputs) {
      const type = thread.types[datatype] as 'float32';
      feeds[name] = new thread.ort.Tensor(type, data as Float32Array, shape);
    }
    return { feeds };
  } catch (err) {
    return { end: { error: String(err), stage: 'input' } };
  }
}

/** The functions a worker thread is given, as source (see workerMain). */
interface WorkerHelpers {
  inputsOf: typeof arenaInputs;
  wires: typeof outputWires;
  faultsOf: typeof finiteFaults;
  feedsOf: typeof runFeeds;
}

/**
 * What runs inside each worker thread. It is sent as source text (`eval`), with the helpers it
 * takes as arguments, so the same code runs from the TypeScript sources under the test runner,
 * the compiled build and the bundle. It reaches modules only through
 * `process.getBuiltinModule`: a bundler renames `require` and `import` in the code it bundles,
 * but that renamed helper does not exist in the worker.
 */
function workerMain(helpers: WorkerHelpers): void {
  const threads = process.getBuiltinModule('node:worker_threads');
  const { runtime, types, arrays, gate, states } = threads.workerData as {
    runtime: string;
    types: Record<string, string>;
    arrays: Record<string, string>;
    gate: Int32Array;
    states: typeof gateStates;
  };
  const held: Held = { arena: undefined, own: new ArrayBuffer(0) };
  const ort = process.getBuiltinModule('node:module').createRequire(runtime)(runtime) as typeof Ort;
  const oip = new Map(Object.entries(types).map(([k, v]) => [v, k]));
  const port = threads.parentPort!;
  /** Asked to stop: says so, then blocks until the main thread terminates this one. */
  const park = (): never => {
    Atomics.store(gate, 0, states.parked);
    port.postMessage({ parked: true });
    for (;;) Atomics.wait(gate, 0, states.parked);
  };
  /** Leaves onnxruntime: parks instead when a stop was asked meanwhile. */
  const leave = () => {
    if (Atomics.compareExchange(gate, 0, states.busy, states.idle) !== states.busy) park();
  };
  const feedsOf = (message: RunMessage) =>
    helpers.feedsOf(message, held, { ort, types, arrays }, helpers);
  const reply = (result: Ort.InferenceSession.ReturnType) => {
    const { outputs, transfer } = helpers.wires(result, oip, held.own);
    port.postMessage({ outputs }, transfer);
  };
  const failed = (stage: FailureStage, err: unknown) =>
    port.postMessage({ error: String(err), stage });
  const serve = (session: Ort.InferenceSession) => {
    port.on('message', (message: RunMessage) => {
      // Busy already: a second message during a run, which the pool never sends (one run per
      // thread at a time); only a stop asked for parks here.
      if (Atomics.compareExchange(gate, 0, states.idle, states.busy) === states.stop) park();
      // Anything but a RunMessage is a bug of the main thread's: this thread dies of it (an
      // uncaught error), rather than answering a run it was not sent.
      if (!Array.isArray(message.inputs)) throw new TypeError('not a run message');
      const fed = feedsOf(message);
      if ('end' in fed) {
        leave();
        port.postMessage(fed.end);
        return;
      }
      session.run(fed.feeds).then(
        (result) => {
          leave();
          try {
            reply(result);
          } catch (err) {
            failed('output', err);
          }
        },
        (err: unknown) => {
          leave();
          failed('run', err);
        },
      );
    });
  };
  // onnxruntime was loaded above with the gate busy (native work); the model comes next, and
  // until it does this thread is outside onnxruntime (a stop asked meanwhile parks it here).
  leave();
  port.once('message', ({ model, options }: LoadMessage) => {
    if (Atomics.compareExchange(gate, 0, states.idle, states.busy) === states.stop) park();
    ort.InferenceSession.create(model, options).then(
      (session) => {
        leave();
        const { inputMetadata, outputMetadata } = session;
        port.postMessage({ ready: true, inputMetadata, outputMetadata });
        serve(session);
      },
      (err: unknown) => {
        leave();
        port.postMessage({ ready: false, error: String(err) });
      },
    );
  });
}

/** The first message to a thread: the model its session loads. */
interface LoadMessage {
  model: Uint8Array;
  options: InferenceSession.SessionOptions;
}

/** One worker thread with its own session; it answers a RunMessage (arena.ts) with a RunReply. */
interface OnnxThread {
  readonly worker: Worker;
  readonly signature: Signature;
  /**
   * Terminates the thread without taking the process with it: at once when it is outside
   * onnxruntime, else as soon as its run (or model load) returns; the run's reply is then never
   * sent, as if the thread had died holding it. Resolves when the thread has exited, or after
   * `withinMs` with the thread left running (unref'd) when its run has not returned by then.
   */
  stop(withinMs?: number): Promise<void>;
}

/** Whether a message from a thread is its notice that it parked (see gateStates). */
function isParkedNotice(message: unknown): boolean {
  return typeof message === 'object' && message !== null && 'parked' in message;
}

/** `stop` for one thread: the gate's compare-and-swap decides when terminating is safe. */
function stopper(worker: Worker, gate: Int32Array): (withinMs?: number) => Promise<void> {
  let stopping: Promise<void> | undefined;
  const stop = async (withinMs: number) => {
    const gone = new Promise<void>((resolve) => {
      if (worker.threadId < 0) resolve();
      worker.once('exit', () => resolve());
    });
    const seen = Atomics.compareExchange(gate, 0, gateStates.idle, gateStates.stop);
    if (seen === gateStates.busy) {
      if (Atomics.compareExchange(gate, 0, gateStates.busy, gateStates.stop) === gateStates.busy) {
        const parked = new Promise<void>((resolve) => {
          const listener = (message: unknown) => {
            if (!isParkedNotice(message)) return;
            worker.off('message', listener);
            resolve();
          };
          worker.on('message', listener);
        });
        const outcome = await Promise.race([
          parked.then(() => 'parked' as const),
          gone.then(() => 'gone' as const),
          Number.isFinite(withinMs)
            ? sleep(withinMs, 'late' as const, { ref: false })
            : new Promise<never>(() => {}),
        ]);
        if (outcome === 'late') {
          worker.unref();
          return;
        }
      }
    }
    // Idle (it can no longer enter a run), parked, or already exited: terminate is safe.
    await worker.terminate();
    await gone;
  };
  return (withinMs = Infinity) => (stopping ??= stop(withinMs));
}

/** What a thread says once its session is made, or could not be. */
interface ReadyMessage {
  ready: boolean;
  error?: string;
  inputMetadata?: InferenceSession.ValueMetadata[];
  outputMetadata?: InferenceSession.ValueMetadata[];
}

/** A thread started with onnxruntime loaded (or loading), not yet given a model. */
interface BlankThread {
  worker: Worker;
  stop: (withinMs?: number) => Promise<void>;
  /** Its first message (once a model is sent), or how it died before sending one. */
  ready: Promise<ReadyMessage>;
}

/**
 * Starts a thread that loads onnxruntime and then waits for a model. Its death before it answers
 * is captured at once (`ready` rejects), so a thread nobody has claimed yet cannot raise an
 * unhandled 'error'. Unref'd until claimed: a thread only started ahead of time does not keep
 * the process alive.
 */
function spawnThread(): BlankThread {
  const gate = new Int32Array(new SharedArrayBuffer(4));
  // Busy from the start: loading onnxruntime is native work.
  Atomics.store(gate, 0, gateStates.busy);
  const worker = new Worker(
    `(${workerMain.toString()})({ inputsOf: ${arenaInputs.toString()}, wires: ${outputWires.toString()}, faultsOf: ${finiteFaults.toString()}, feedsOf: ${runFeeds.toString()} })`,
    {
      eval: true,
      workerData: {
        runtime: requireHere.resolve('onnxruntime-node'),
        types: ortTypes,
        arrays: arrayNames,
        gate,
        states: gateStates,
      },
    },
  );
  worker.unref();
  const ready = new Promise<ReadyMessage>((resolve, reject) => {
    worker.once('message', (m: ReadyMessage) => resolve(m));
    worker.once('error', reject);
    worker.once('exit', (code) => reject(new Error(`the thread exited with code ${code}`)));
  });
  // Observed by whoever claims the thread; until then a death must not be an unhandled rejection.
  ready.catch(() => undefined);
  return { worker, stop: stopper(worker, gate), ready };
}

/** Threads started ahead of time (prestartOnnxThread), taken first by startOnnxWorker. */
const prestarted: BlankThread[] = [];

/**
 * Starts one thread now, for the next startOnnxWorker to take: it loads onnxruntime while the
 * caller goes on loading its own modules and reading its model. Call it only when a pool will
 * be made (bin/serve.ts does, for the inference workers). Returns the thread's id.
 */
function prestartOnnxThread(): number {
  const thread = spawnThread();
  prestarted.push(thread);
  return thread.worker.threadId;
}

/** Starts a worker thread with its own session on `model` (a prestarted one when there is one). */
async function startOnnxWorker(model: Uint8Array): Promise<OnnxThread> {
  const thread = prestarted.shift() ?? spawnThread();
  const { worker, stop } = thread;
  worker.ref();
  // Copied into the thread, as workerData would be: the caller keeps its bytes.
  worker.postMessage({ model, options: sessionOptions } satisfies LoadMessage);
  const message = await thread.ready;
  if (!message.ready) {
    await stop();
    throw new Error(`model does not load: ${message.error ?? 'unknown error'}`);
  }
  try {
    const signature = signatureOf({
      inputMetadata: message.inputMetadata ?? [],
      outputMetadata: message.outputMetadata ?? [],
    });
    return { worker, signature, stop };
  } catch (err) {
    await stop();
    throw new Error(`model cannot be served: ${err instanceof Error ? err.message : String(err)}`, {
      cause: err,
    });
  }
}

export {
  openOnnxModel,
  loadOnnxModel,
  prestartOnnxThread,
  startOnnxWorker,
  signatureOf,
  isParkedNotice,
};
export type { FailureStage, OnnxModel, OnnxSession, OnnxThread, RunReply, WireTensor };
