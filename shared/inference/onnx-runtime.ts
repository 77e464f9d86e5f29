/**
 * The only file that imports onnxruntime-node. A model is loaded from bytes (checked by the
 * caller); its signature (names, datatypes, shapes with -1 for open dimensions) comes from the
 * session's metadata, never from assumptions about what models look like. `run` is synchronous
 * native work that blocks the event loop of the thread it runs on: the serving path runs models
 * in worker threads (startOnnxWorker, used by the inference pool), never on the HTTP thread.
 */
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import type * as Ort from 'onnxruntime-node';
import { InferenceSession, Tensor as OrtTensor } from 'onnxruntime-node';
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
  return new OrtTensor(
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
  const session = await InferenceSession.create(bytes, {
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

/** One session run in a worker: each request's inputs by name, joined along the first dimension. */
interface RunMessage {
  requests: Array<Record<string, WireTensor>>;
}

type RunReply = { outputs: Record<string, WireTensor> } | { error: string };

/**
 * What runs inside each worker thread. It is sent as source text (`eval`), so the same code runs
 * from the TypeScript sources under the test runner, the compiled build and the bundle. It
 * reaches modules only through `process.getBuiltinModule`: a bundler renames `require` and
 * `import` in the code it bundles, but that renamed helper does not exist in the worker.
 */
function workerMain(): void {
  const threads = process.getBuiltinModule('node:worker_threads');
  const { model, runtime, types } = threads.workerData as {
    model: Uint8Array;
    runtime: string;
    types: Record<string, string>;
  };
  const ort = process.getBuiltinModule('node:module').createRequire(runtime)(runtime) as typeof Ort;
  const oip = new Map(Object.entries(types).map(([k, v]) => [v, k]));
  const port = threads.parentPort!;
  type Wire = { datatype: string; shape: readonly number[]; data: ArrayLike<unknown> };
  const join = (parts: Wire[]): Wire => {
    if (parts.length === 1) return parts[0]!;
    const rows = parts.reduce((n, p) => n + (p.shape[0] ?? 1), 0);
    const first = parts[0]!.data;
    let data: ArrayLike<unknown>;
    if (Array.isArray(first)) data = parts.flatMap((p) => p.data as string[]);
    else {
      const length = parts.reduce((n, p) => n + p.data.length, 0);
      const out = new (first.constructor as new (n: number) => Float32Array)(length);
      let at = 0;
      for (const part of parts) {
        out.set(part.data as Float32Array, at);
        at += part.data.length;
      }
      data = out;
    }
    return { datatype: parts[0]!.datatype, shape: [rows, ...parts[0]!.shape.slice(1)], data };
  };
  const owned = (data: ArrayLike<unknown>): ArrayLike<unknown> => {
    if (Array.isArray(data)) return data as string[];
    const view = data as Float32Array;
    // A view into a larger buffer cannot be transferred without sending the rest along.
    return view.byteOffset === 0 && view.byteLength === view.buffer.byteLength
      ? view
      : view.slice();
  };
  ort.InferenceSession.create(model, {
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  }).then(
    (session) => {
      port.postMessage({
        ready: true,
        inputMetadata: session.inputMetadata,
        outputMetadata: session.outputMetadata,
      });
      port.on('message', (message: { requests: Array<Record<string, Wire>> }) => {
        const feeds: Record<string, Ort.Tensor> = {};
        for (const name of Object.keys(message.requests[0]!)) {
          const joined = join(message.requests.map((request) => request[name]!));
          feeds[name] = new ort.Tensor(
            types[joined.datatype] as 'float32',
            joined.data as Float32Array,
            joined.shape,
          );
        }
        session.run(feeds).then(
          (result) => {
            const outputs: Record<string, Wire> = {};
            const transfer: ArrayBuffer[] = [];
            for (const [name, value] of Object.entries(result)) {
              const data = owned(value.data);
              if (!Array.isArray(data)) transfer.push((data as Float32Array).buffer as ArrayBuffer);
              outputs[name] = {
                datatype: oip.get(value.type) ?? value.type,
                shape: value.dims,
                data,
              };
            }
            port.postMessage({ outputs }, transfer);
          },
          (err: unknown) => port.postMessage({ error: String(err) }),
        );
      });
    },
    (err: unknown) => port.postMessage({ ready: false, error: String(err) }),
  );
}

/** A worker thread with its own session; it answers a RunMessage with a RunReply. */
async function startOnnxWorker(
  model: Uint8Array,
): Promise<{ worker: Worker; signature: Signature }> {
  const worker = new Worker(`(${workerMain.toString()})()`, {
    eval: true,
    workerData: {
      model,
      runtime: createRequire(import.meta.url).resolve('onnxruntime-node'),
      types: ortTypes,
    },
  });
  const [message] = (await new Promise<unknown[]>((resolve, reject) => {
    worker.once('message', (m) => resolve([m]));
    worker.once('error', reject);
  })) as [
    {
      ready: boolean;
      error?: string;
      inputMetadata?: InferenceSession.ValueMetadata[];
      outputMetadata?: InferenceSession.ValueMetadata[];
    },
  ];
  if (!message.ready) {
    await worker.terminate();
    throw new Error(`model does not load: ${message.error ?? 'unknown error'}`);
  }
  try {
    const signature = signatureOf({
      inputMetadata: message.inputMetadata ?? [],
      outputMetadata: message.outputMetadata ?? [],
    });
    return { worker, signature };
  } catch (err) {
    await worker.terminate();
    throw new Error(`model cannot be served: ${err instanceof Error ? err.message : String(err)}`, {
      cause: err,
    });
  }
}

export { openOnnxModel, loadOnnxModel, startOnnxWorker, signatureOf };
export type { OnnxModel, OnnxSession, RunMessage, RunReply, WireTensor };
