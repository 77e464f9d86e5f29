/**
 * The central baseline the federated target derives from: the 2NN trained on all the training
 * digits at once by the project's central trainer (shared/training/train.ts: seeded mini-batch
 * Adam, keeping the epoch with the best validation accuracy), then scored on the test digits by
 * the evaluator the federated runs use.
 */
import type { Evaluation } from '../../shared/fl/local-train.js';
import type { Dataset } from '../../shared/training/data.js';
import type { LayerSpec } from '../../shared/training/network.js';
import { exportOnnx } from '../../shared/training/onnx-export.js';
import { train } from '../../shared/training/train.js';

interface CentralOptions {
  readonly layers: readonly LayerSpec[];
  readonly epochs: number;
  readonly batch: number;
  readonly rate: number;
  readonly seed: number;
}

interface CentralResult {
  readonly test: Evaluation;
  readonly bestEpoch: number;
  readonly validationAccuracy: number;
  readonly ms: number;
}

/** Trains centrally on `data.train` (validation picks the epoch) and evaluates on `data.test`. */
async function centralBaseline(
  data: Dataset,
  options: CentralOptions,
  evaluate: (model: Uint8Array) => Promise<Evaluation>,
): Promise<CentralResult> {
  const started = performance.now();
  const { network, history, bestEpoch } = train(data, options);
  const test = await evaluate(exportOnnx(network, 'central-2nn', 'bench/fl-learning'));
  return {
    test,
    bestEpoch,
    validationAccuracy: history[bestEpoch - 1]?.validationAccuracy ?? 0,
    ms: performance.now() - started,
  };
}

/** The federated target: the central test accuracy minus `points` percentage points. */
function targetAccuracy(central: number, points: number): number {
  return central - points / 100;
}

export { centralBaseline, targetAccuracy };
export type { CentralOptions, CentralResult };
