/** router: an ML-graph node that picks the children each request goes to, and learns from rewards. */
import type { FunctionFactory } from '../../shared/http/index.js';
import {
  createRouteStore,
  createRouter,
  loadRouterConfig,
  routerDefinition,
} from '../../shared/mlgraph/index.js';
import { redisReadiness, requireRedis } from '../../shared/redis/index.js';
import { defineMetrics } from '../../shared/telemetry/index.js';
import { normal } from '../../shared/random/index.js';

const factory: FunctionFactory = ({ config, telemetry }) => {
  const settings = loadRouterConfig();
  const redis = requireRedis(config.redis, 'router', telemetry.log);
  const unknownRewards = defineMetrics(telemetry).counter(
    'edgeai_mlgraph_unknown_rewards_total',
    'Reward events for predictions this router never routed or has forgotten',
  );
  const router = createRouter({
    strategy: settings.strategy,
    children: settings.children,
    store: createRouteStore(redis, { node: settings.node, puidTtlMs: settings.puidTtlMs }),
    uniform: Math.random,
    normal: normal(Math.random),
  });
  return Promise.resolve({
    definition: routerDefinition({
      router,
      readiness: [redisReadiness(redis)],
      onUnknownReward: () => unknownRewards(),
    }),
    close: () => {
      redis.disconnect();
      return Promise.resolve();
    },
  });
};

export default factory;
