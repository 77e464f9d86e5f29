/** The development Knative Serving of the embedded local stack: see docs/dev-serving.md. */
export { createServingSupervisor } from './supervisor.js';
export { ContainerConfigError, resolveContainerEnv, secretData } from './env.js';
export { parseServiceUrl, rewriteServiceUrls } from './service-url.js';
export { serviceStatus } from './status.js';
export type {
  LogSource,
  ServingProcess,
  ServingSupervisor,
  ServingSupervisorOptions,
} from './supervisor.js';
export type { EnvSources } from './env.js';
export type { ServiceRoutes, ServiceUrl } from './service-url.js';
export type { Condition, ServiceStatus, ServiceView } from './status.js';
export type { Container, RevisionRef } from './types.js';
