/** upstream-status: edge workers' reports into the JointInferenceService status. */
import type { FunctionFactory } from '../../shared/http/index.js';
import { createKube, loadKubeConfig } from '../../shared/k8s/index.js';
import { redisReadiness, requireRedis } from '../../shared/redis/index.js';
import {
  createReportCounters,
  createUpstream,
  loadUpstreamConfig,
  secretTokens,
  upstreamStatusDefinition,
} from '../../shared/status/index.js';

const factory: FunctionFactory = async ({ config, telemetry }) => {
  const settings = loadUpstreamConfig();
  const kube = createKube(loadKubeConfig());
  const redis = requireRedis(config.redis, 'upstream-status', telemetry.log);
  const upstream = createUpstream({
    kube,
    counters: createReportCounters(redis, settings),
    attempts: settings.statusWriteAttempts,
  });
  const definition = upstreamStatusDefinition({
    upstream,
    tokens: secretTokens(kube, settings.tokenNamespace, settings.tokenCacheMs),
    maxReportAgeMs: settings.maxReportAgeMs,
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
