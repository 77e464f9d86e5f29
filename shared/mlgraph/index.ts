/** The ML-graph data plane: the router and joiner nodes (route and join contracts). */
export { headers, extensions } from './headers.js';
export { createJoinStore } from './join-store.js';
export { createJoiner, sweepEvery } from './joiner.js';
export { loadJoinerConfig } from './joiner-config.js';
export { joinerDefinition } from './joiner-definition.js';
export { createRouteStore } from './route-store.js';
export { createRouter } from './router.js';
export { loadRouterConfig } from './router-config.js';
export { routerDefinition } from './router-definition.js';
export { strategy, route } from './strategies.js';
export type { JoinStore, Joined, JoinState, AddOutcome } from './join-store.js';
export type { Joiner, JoinResult } from './joiner.js';
export type { JoinerConfig } from './joiner-config.js';
export type { RouteStore, RewardOutcome } from './route-store.js';
export type { Router } from './router.js';
export type { RouterConfig } from './router-config.js';
export type { Strategy, ArmStats } from './strategies.js';
