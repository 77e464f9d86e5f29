/**
 * The graph's built-in routers, which the executor runs itself instead of calling (a hop saved
 * on every request): each on the Redis state of the router node's own Service (the same
 * MLGRAPH_NODE name), so that Service's `/arms` shows what the graph's traffic taught it.
 */
import type { GraphPlan } from '../messages/graph-plan.js';
import type { RedisClient } from '../redis/index.js';
import { createRouteStore } from './route-store.js';
import { createRouter } from './router.js';
import type { Router } from './router.js';

function createBuiltinRouters(
  plan: GraphPlan,
  deps: {
    redis: RedisClient;
    puidTtlMs: number;
    uniform: () => number;
    normal: () => number;
    /** A node's measured call latency in seconds, for latency costs (arm-costs.ts). */
    latency?: (node: string) => number | undefined;
  },
): Map<string, Router> {
  const routers = new Map<string, Router>();
  for (const node of plan.nodes) {
    if (node.kind !== 'router' || node.router === undefined) continue;
    const store = createRouteStore(deps.redis, {
      node: node.router.node,
      puidTtlMs: deps.puidTtlMs,
    });
    routers.set(
      node.name,
      createRouter({
        strategy: node.router.strategy,
        children: node.children.map((c) => c.node),
        store,
        uniform: deps.uniform,
        normal: deps.normal,
        costs: node.router.costs,
        latency: deps.latency,
      }),
    );
  }
  return routers;
}

export { createBuiltinRouters };
