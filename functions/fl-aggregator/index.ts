/** fl-aggregator: one FederatedLearningJob's rounds (see shared/fl). */
import type { FunctionFactory } from '../../shared/http/index.js';
import {
  createAggregatorRuntime,
  flAggregatorDefinition,
  loadAggregatorConfig,
} from '../../shared/fl/index.js';
import { redisReadiness, requireRedis } from '../../shared/redis/index.js';

const factory: FunctionFactory = async ({ config, telemetry }) => {
  const settings = loadAggregatorConfig();
  const redis = requireRedis(config.redis, 'fl-aggregator', telemetry.log);
  const runtime = await createAggregatorRuntime({ settings, redis, log: telemetry.log });
  const definition = flAggregatorDefinition({
    config: settings.job,
    aggregator: runtime.aggregator,
    tokens: settings.tokens,
    maxUpdateBytes: settings.maxUpdateBytes,
    readiness: [redisReadiness(redis), { name: 'rounds', check: () => runtime.started() }],
  });
  return {
    definition,
    close: async () => {
      runtime.close();
      redis.disconnect();
    },
  };
};

export default factory;
