/** edge-infer: the small model, hard-example mining and offload (see shared/inference). */
import type { FunctionFactory } from '../../shared/http/index.js';
import { startEdgeWorker } from '../../shared/inference/index.js';

const factory: FunctionFactory = (runtime) => startEdgeWorker(runtime);

export default factory;
