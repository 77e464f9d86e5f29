/**
 * router: an ML-graph node that picks the children each request goes to, and learns from
 * rewards; with MLGRAPH_GRAPH, a whole graph's executor (its entry node).
 */
import type { FunctionFactory } from '../../shared/http/index.js';
import {
  createBuiltinOutliers,
  createBuiltinRouters,
  createExecutor,
  createGraphClient,
  createLatencyBook,
  createPathStore,
  createRouteStore,
  createRouter,
  graphDefinition,
  inGraphMode,
  loadGraphConfig,
  loadRouterConfig,
  routerDefinition,
} from '../../shared/mlgraph/index.js';
import { redisReadiness, requireRedis } from '../../shared/redis/index.js';
import { defineMetrics } from '../../shared/telemetry/index.js';
import { normal } from '../../shared/random/index.js';

const graphFactory: FunctionFactory = async ({ config, telemetry }) => {
  const settings = loadGraphConfig();
  const outliers = await createBuiltinOutliers(settings.plan, {
    root: settings.modelRoot,
    cacheDir: settings.cacheDir,
  });
  const redis = requireRedis(config.redis, 'router', telemetry.log);
  const metrics = defineMetrics(telemetry);
  const steps = metrics.histogram(
    'edgeai_mlgraph_step_seconds',
    'Calls from the graph executor to each node, by node and outcome (ok, skipped, failed)',
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    ['node', 'outcome'],
  );
  const client = createGraphClient({ pipeline: settings.pipeline });
  // Each node's call latency, for routers whose children cost by latency (arm-costs.ts).
  const latency = createLatencyBook();
  const executor = createExecutor({
    plan: settings.plan,
    outliers,
    routers: createBuiltinRouters(settings.plan, {
      redis,
      puidTtlMs: settings.puidTtlMs,
      uniform: Math.random,
      normal: normal(Math.random),
      latency: (node) => latency.seconds(node),
    }),
    send: client.send,
    paths: createPathStore(redis, { graph: settings.plan.graph, ttlMs: settings.puidTtlMs }),
    now: () => performance.now(),
    observe: (node, outcome, seconds) => {
      steps({ node, outcome }, seconds);
      if (outcome === 'ok') latency.record(node, seconds);
    },
  });
  return {
    definition: graphDefinition({
      name: settings.plan.graph.split('/')[1]!,
      executor,
      readiness: [redisReadiness(redis)],
    }),
    close: () => {
      client.close();
      redis.disconnect();
      return Promise.resolve();
    },
  };
};

const factory: FunctionFactory = (runtime) => {
  if (inGraphMode()) return graphFactory(runtime);
  const { config, telemetry } = runtime;
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
    costs: settings.costs,
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
