/** cloud-infer: the big model behind the Open Inference Protocol (see shared/inference). */
import type { FunctionFactory } from '../../shared/http/index.js';
// By file: the domain's index loads every part of it, the edge worker's too.
import { startCloudWorker } from '../../shared/inference/workers.js';

const factory: FunctionFactory = (runtime) => startCloudWorker(runtime);

export default factory;
