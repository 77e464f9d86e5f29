/** The ML-graph data plane: the router and joiner nodes (route and join contracts) and the graph executor. */
export { createJoinStore } from './join-store.js';
export { createJoiner, sweepEvery } from './joiner.js';
export { loadJoinerConfig } from './joiner-config.js';
export { joinerDefinition } from './joiner-definition.js';
export { createRouteStore } from './route-store.js';
export { createRouter } from './router.js';
export { loadRouterConfig } from './router-config.js';
export { routerDefinition } from './router-definition.js';
export { createExecutor } from './executor.js';
export { createGraphClient } from './http1-client.js';
export { inGraphMode, loadGraphConfig } from './graph-config.js';
export { graphDefinition } from './graph-definition.js';
export { createPathStore } from './path-store.js';
export { createBuiltinRouters } from './builtin-routers.js';
export { createBuiltinOutliers } from './outlier-node.js';
export { createLatencyBook } from './arm-costs.js';
export { joinedAnswer } from './join-answer.js';
