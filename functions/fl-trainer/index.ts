/** fl-trainer: one Dataset's trainer of a FederatedLearningJob, pinned to the Dataset's node. */
import {
  createTrainer,
  createTrainerClient,
  flTrainerDefinition,
  loadTrainerConfig,
  readDataset,
} from '../../shared/fl/index.js';
import type { FunctionFactory } from '../../shared/http/index.js';

const factory: FunctionFactory = async ({ telemetry }) => {
  const config = loadTrainerConfig();
  const client = createTrainerClient({
    aggregatorUrl: config.aggregatorUrl,
    job: config.job,
    worker: config.worker,
    node: config.node,
    token: config.token,
    timeoutMs: config.requestTimeoutMs,
    modelTimeoutMs: config.modelTimeoutMs,
  });
  const trainer = createTrainer({ config, client, readDataset, log: telemetry.log });
  // A trainer that starts before its aggregator waits for it, in the background.
  const stop = new AbortController();
  void trainer.startupPoll(stop.signal);
  return {
    definition: flTrainerDefinition({ trainer, readiness: [] }),
    close: async () => {
      stop.abort();
    },
  };
};

export default factory;
