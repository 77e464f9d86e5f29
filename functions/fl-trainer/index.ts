/** fl-trainer: one Dataset's trainer of a FederatedLearningJob, pinned to the Dataset's node. */
// The trainer's modules, not shared/fl's index: the round store (Redis) is the aggregator's.
import { createTrainerClient } from '../../shared/fl/client.js';
import { createTrainer } from '../../shared/fl/trainer.js';
import { loadTrainerConfig } from '../../shared/fl/trainer-config.js';
import { flTrainerDefinition } from '../../shared/fl/trainer-definition.js';
import { localTraining } from '../../shared/fl/training-thread.js';
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
  const training = localTraining({
    source: {
      url: config.datasetUrl,
      format: config.datasetFormat,
      maxBytes: config.maxDatasetBytes,
    },
    nice: config.trainingNice,
    log: telemetry.log,
  });
  const trainer = createTrainer({ config, client, training, log: telemetry.log });
  // A trainer that starts before its aggregator waits for it, in the background.
  const stop = new AbortController();
  void trainer.startupPoll(stop.signal);
  return {
    definition: flTrainerDefinition({
      trainer,
      node: config.node,
      token: config.token,
      readiness: [],
    }),
    close: async () => {
      stop.abort();
      await training.close();
    },
  };
};

export default factory;
