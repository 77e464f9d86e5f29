/**
 * Federated learning, as the programs import it: the aggregator function's wiring, and the
 * partitions and Dataset files of `npm run fl:data`. The trainer function and reconcile-tick
 * import the modules they need directly (shared/fl/trainer*.ts, progress.ts), so neither bundle
 * carries the other's (Redis, onnx-proto); tests import modules directly too.
 */
export { partition, partitionKinds, labelHistogram } from './partition.js';
export type { PartitionKind } from './partition.js';
export { writeDatasetCsv } from './dataset-file.js';
export { loadAggregatorConfig } from './aggregator-config.js';
export { createAggregatorRuntime } from './aggregator-runtime.js';
export { flAggregatorDefinition } from './aggregator-definition.js';
