/** The Kubernetes kinds the control plane reads and writes, by the name the code uses. */

interface Kind {
  group: string;
  version: string;
  plural: string;
  kind: string;
  namespaced: boolean;
}

const kinds = Object.freeze({
  jointInferenceService: {
    group: 'edgeai.io',
    version: 'v1alpha1',
    plural: 'jointinferenceservices',
    kind: 'JointInferenceService',
    namespaced: true,
  },
  model: {
    group: 'edgeai.io',
    version: 'v1alpha1',
    plural: 'models',
    kind: 'Model',
    namespaced: true,
  },
  mlGraph: {
    group: 'edgeai.io',
    version: 'v1alpha1',
    plural: 'mlgraphs',
    kind: 'MLGraph',
    namespaced: true,
  },
  federatedLearningJob: {
    group: 'edgeai.io',
    version: 'v1alpha1',
    plural: 'federatedlearningjobs',
    kind: 'FederatedLearningJob',
    namespaced: true,
  },
  dataset: {
    group: 'edgeai.io',
    version: 'v1alpha1',
    plural: 'datasets',
    kind: 'Dataset',
    namespaced: true,
  },
  knativeService: {
    group: 'serving.knative.dev',
    version: 'v1',
    plural: 'services',
    kind: 'Service',
    namespaced: true,
  },
  node: { group: '', version: 'v1', plural: 'nodes', kind: 'Node', namespaced: false },
  secret: { group: '', version: 'v1', plural: 'secrets', kind: 'Secret', namespaced: true },
  event: { group: '', version: 'v1', plural: 'events', kind: 'Event', namespaced: true },
} as const satisfies Record<string, Kind>);

type KindName = keyof typeof kinds;

function apiVersion(kind: Kind): string {
  return kind.group === '' ? kind.version : `${kind.group}/${kind.version}`;
}

export { kinds, apiVersion };
export type { Kind, KindName };
