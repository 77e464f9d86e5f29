/** upstream-status: edge workers' reports into the JointInferenceService status. */
import type { FunctionFactory } from '../../bin/serve.js';
import { ConfigError } from '../../shared/errors/index.js';
import { createKube, loadKubeConfig } from '../../shared/k8s/index.js';
import { createRedis, redisReadiness } from '../../shared/redis/index.js';
import {
  createReportCounters,
  createUpstream,
  loadUpstreamConfig,
  secretTokens,
  upstreamStatusDefinition,
} from '../../shared/status/index.js';

const factory: FunctionFactory = async ({ config, telemetry }) => {
  const settings = loadUpstreamConfig();
  if (config.redis.url === undefined)
    throw new ConfigError('REDIS_URL: required by upstream-status');
  const kube = createKube(loadKubeConfig());
  const redis = createRedis({ ...config.redis, url: config.redis.url }, (err) =>
    telemetry.log.warn({ err: err.message }, 'redis connection error'),
  );
  const upstream = createUpstream({
    kube,
    counters: createReportCounters(redis, settings),
    attempts: settings.statusWriteAttempts,
  });
  const definition = upstreamStatusDefinition({
    upstream,
    tokens: secretTokens(kube, settings.tokenNamespace, settings.tokenCacheMs),
    readiness: [redisReadiness(redis), { name: 'kubernetes', check: () => kube.ping() }],
  });
  return {
    definition,
    close: async () => {
      redis.disconnect();
    },
  };
};

export default factory;
