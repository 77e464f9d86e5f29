/** edge-infer: the small model, hard-example mining and offload (see shared/inference). */
import type { FunctionFactory } from '../../shared/http/index.js';
// By file: the domain's index loads every part of it, this worker's optional ones too.
import { startEdgeWorker } from '../../shared/inference/workers.js';

const factory: FunctionFactory = (runtime) => startEdgeWorker(runtime);

export default factory;
