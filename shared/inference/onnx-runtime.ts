/**
 * The only file that imports onnxruntime-node. A model is loaded from bytes (checked by the
 * caller) and run on a batch given as one row-major Float32Array. `run` is synchronous native
 * work that blocks the event loop of the thread it runs on: the serving path runs models in
 * worker threads (startOnnxWorker, used by the inference pool), never on the HTTP thread.
 */
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import type * as Ort from 'onnxruntime-node';
import { InferenceSession, Tensor } from 'onnxruntime-node';

interface OnnxModel {
  /** Features per sample. */
  readonly inputWidth: number;
  /** Outputs per sample. */
  readonly outputWidth: number;
  /** Runs `batch` samples (`input.length === batch * inputWidth`). */
  run(input: Float32Array, batch: number): Promise<Float32Array>;
  close(): Promise<void>;
}

function widthOf(metadata: unknown, what: string): number {
  const shape = (metadata as { shape?: unknown[] } | undefined)?.shape;
  const width = shape?.[1];
  if (shape?.length !== 2 || typeof width !== 'number') {
    throw new Error(`${what}: expected shape [N, width], got ${JSON.stringify(shape)}`);
  }
  return width;
}

async function loadOnnxModel(
  bytes: Uint8Array,
  options: { threads?: number } = {},
): Promise<OnnxModel> {
  const session = await InferenceSession.create(bytes, {
    intraOpNumThreads: options.threads ?? 1,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  const [inputName] = session.inputNames;
  const [outputName] = session.outputNames;
  if (inputName === undefined || outputName === undefined)
    throw new Error('model has no input or output');
  const inputWidth = widthOf(session.inputMetadata[0], 'model input');
  const outputWidth = widthOf(session.outputMetadata[0], 'model output');
  return {
    inputWidth,
    outputWidth,
    async run(input, batch) {
      const result = await session.run({
        [inputName]: new Tensor('float32', input, [batch, inputWidth]),
      });
      return result[outputName]!.data as Float32Array;
    },
    close: () => session.release(),
  };
}

/**
 * What runs inside each worker thread. It is sent as source text (`eval`), so the same code runs
 * from the TypeScript sources under the test runner, the compiled build and the bundle. It
 * reaches modules only through `process.getBuiltinModule`: a bundler renames `require` and
 * `import` in the code it bundles, but that renamed helper does not exist in the worker.
 */
function workerMain(): void {
  const threads = process.getBuiltinModule('node:worker_threads');
  const { model, runtime } = threads.workerData as { model: Uint8Array; runtime: string };
  const ort = process.getBuiltinModule('node:module').createRequire(runtime)(runtime) as typeof Ort;
  const port = threads.parentPort!;
  const ready = ort.InferenceSession.create(model, {
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  ready.then(
    (session) => {
      const meta = session.inputMetadata[0] as unknown as { shape: number[] };
      const out = session.outputMetadata[0] as unknown as { shape: number[] };
      port.postMessage({ ready: true, inputWidth: meta.shape[1], outputWidth: out.shape[1] });
      port.on('message', (message: { inputs: Float32Array[]; rows: number }) => {
        let input: Float32Array;
        if (message.inputs.length === 1) input = message.inputs[0]!;
        else {
          input = new Float32Array(message.rows * meta.shape[1]!);
          let offset = 0;
          for (const part of message.inputs) {
            input.set(part, offset);
            offset += part.length;
          }
        }
        const tensor = new ort.Tensor('float32', input, [message.rows, meta.shape[1]!]);
        session.run({ [session.inputNames[0]!]: tensor }).then(
          (result) => {
            const output = result[session.outputNames[0]!]!.data as Float32Array;
            port.postMessage({ output }, [output.buffer as ArrayBuffer]);
          },
          (err: unknown) => port.postMessage({ error: String(err) }),
        );
      });
    },
    (err: unknown) => port.postMessage({ ready: false, error: String(err) }),
  );
}

/** A worker thread with its own session; it answers `{inputs, rows}` with `{output}`. */
async function startOnnxWorker(
  model: Uint8Array,
): Promise<{ worker: Worker; inputWidth: number; outputWidth: number }> {
  const worker = new Worker(`(${workerMain.toString()})()`, {
    eval: true,
    workerData: { model, runtime: createRequire(import.meta.url).resolve('onnxruntime-node') },
  });
  const [message] = (await new Promise<unknown[]>((resolve, reject) => {
    worker.once('message', (m) => resolve([m]));
    worker.once('error', reject);
  })) as [{ ready: boolean; inputWidth?: number; outputWidth?: number; error?: string }];
  if (!message.ready) {
    await worker.terminate();
    throw new Error(`model does not load: ${message.error ?? 'unknown error'}`);
  }
  return { worker, inputWidth: message.inputWidth!, outputWidth: message.outputWidth! };
}

export { loadOnnxModel, startOnnxWorker };
export type { OnnxModel };
