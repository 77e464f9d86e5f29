/** The resource types the development API server serves: what the control plane touches. */
import type { ResourceType } from './store.js';

const servedTypes: readonly ResourceType[] = Object.freeze([
  { group: '', version: 'v1', plural: 'nodes', kind: 'Node', namespaced: false, status: true },
  { group: '', version: 'v1', plural: 'secrets', kind: 'Secret', namespaced: true, status: false },
  { group: '', version: 'v1', plural: 'events', kind: 'Event', namespaced: true, status: false },
  {
    group: 'serving.knative.dev',
    version: 'v1',
    plural: 'services',
    kind: 'Service',
    namespaced: true,
    status: true,
  },
  {
    group: 'edgeai.io',
    version: 'v1alpha1',
    plural: 'jointinferenceservices',
    kind: 'JointInferenceService',
    namespaced: true,
    status: true,
  },
  {
    group: 'edgeai.io',
    version: 'v1alpha1',
    plural: 'models',
    kind: 'Model',
    namespaced: true,
    status: true,
  },
]);

export { servedTypes };
