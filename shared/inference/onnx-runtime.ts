/**
 * The only file that imports onnxruntime-node. A model is loaded from bytes (checked by the
 * caller) and run on a batch given as one row-major Float32Array. `run` is synchronous native
 * work that blocks the event loop of the thread it runs on: the serving path calls it from
 * worker threads (see the inference pool), never from the HTTP thread.
 */
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

export { loadOnnxModel };
export type { OnnxModel };
