/** downstream-sync: JointInferenceService changes delivered to their edge nodes. */
import { createHttpClient } from '../../shared/http/index.js';
import type { FunctionFactory } from '../../shared/http/index.js';
import { createKube, loadKubeConfig } from '../../shared/k8s/index.js';
import { redisReadiness, requireRedis } from '../../shared/redis/index.js';
import {
  createDownstream,
  createLocalControllerClient,
  createTaskStreams,
  downstreamSyncDefinition,
  loadSyncConfig,
} from '../../shared/sync/index.js';

const factory: FunctionFactory = async ({ config, telemetry }) => {
  const settings = loadSyncConfig();
  const kube = createKube(loadKubeConfig());
  const redis = requireRedis(config.redis, 'downstream-sync', telemetry.log);
  const http = createHttpClient();
  const downstream = createDownstream({
    kube,
    redis,
    streams: createTaskStreams(redis, { maxLength: settings.streamMaxLength }),
    localControllers: createLocalControllerClient({
      timeoutMs: settings.localControllerTimeoutMs,
      send: http.send,
    }),
  });
  const definition = downstreamSyncDefinition({
    downstream,
    readiness: [redisReadiness(redis), { name: 'kubernetes', check: () => kube.ping() }],
    onResync: (result) => {
      if (result.deleted > 0 || result.failed > 0)
        telemetry.log.warn(result, 'resync made up for lost deletes or left services to retry');
    },
  });
  return {
    definition,
    close: async () => {
      redis.disconnect();
      http.close();
    },
  };
};

export default factory;
