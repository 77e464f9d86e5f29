/** cloud-infer: the big model behind the Open Inference Protocol (see shared/inference). */
import type { FunctionFactory } from '../../shared/http/index.js';
import { startCloudWorker } from '../../shared/inference/index.js';

const factory: FunctionFactory = (runtime) => startCloudWorker(runtime);

export default factory;
