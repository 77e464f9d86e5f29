/** The ML-graph data plane: the router and joiner nodes (route and join contracts). */
export { headers, extensions } from './headers.js';
export { createRouteStore } from './route-store.js';
export { createRouter } from './router.js';
export { loadRouterConfig } from './router-config.js';
export { routerDefinition } from './router-definition.js';
export { strategy, route } from './strategies.js';
export type { RouteStore, RewardOutcome } from './route-store.js';
export type { Router } from './router.js';
export type { RouterConfig } from './router-config.js';
export type { Strategy, ArmStats } from './strategies.js';
