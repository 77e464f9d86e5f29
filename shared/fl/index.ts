/**
 * Federated learning's pure parts: named weights and their wire format, FedAvg, a trainer's
 * local round from the global ONNX model, evaluation, client partitions and dataset files.
 */
export { encodeWeights, decodeWeights } from './weights.js';
export type { Tensor, NamedTensors, DecodeLimits } from './weights.js';
export { fedAvg } from './fedavg.js';
export type { WeightUpdate } from './fedavg.js';
export { networkFrom, weightsOf, digitShape } from './network-weights.js';
export { localTrain, evaluate, optimizers } from './local-train.js';
export type { LocalTrainOptions, LocalUpdate, Evaluation, OptimizerName } from './local-train.js';
export { partition, partitionKinds, labelHistogram } from './partition.js';
export type { PartitionKind, PartitionOptions } from './partition.js';
export { writeDatasetCsv, parseDatasetCsv } from './dataset-file.js';
export { createRoundStore, refusals } from './round-store.js';
export type { RoundStore, RoundState, OfferOutcome, ClaimOutcome, Commit } from './round-store.js';
export type { ParseLimits } from './dataset-file.js';
export { loadTrainerConfig } from './trainer-config.js';
export type { TrainerConfig } from './trainer-config.js';
export {
  createTrainerClient,
  sameOrigin,
  AggregatorUnavailableError,
  AggregatorRejectedError,
  ModelDigestError,
} from './client.js';
export type {
  TrainerClient,
  TrainerClientOptions,
  UpdateToSend,
  UpdateOutcome,
  RoundStatus,
} from './client.js';
export { readDataset } from './dataset-source.js';
export type { DatasetSource, DatasetReader } from './dataset-source.js';
export { createTrainer, exitCodes, RoundFailure } from './trainer.js';
export type { Trainer, TrainerDeps, RoundResult, RoundAnswer } from './trainer.js';
export { flTrainerDefinition } from './trainer-definition.js';
export { createAggregator, stopReason } from './aggregator.js';
export type { Aggregator, AggregatorDeps, RoundView } from './aggregator.js';
export { loadAggregatorConfig } from './aggregator-config.js';
export type { AggregatorConfig } from './aggregator-config.js';
export { createAggregatorRuntime } from './aggregator-runtime.js';
export { flAggregatorDefinition } from './aggregator-definition.js';
