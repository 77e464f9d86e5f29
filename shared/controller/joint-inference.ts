/**
 * The JointInferenceService kind, registered with the engine: its inputs are the Models its
 * workers name and the Nodes they are placed on; its desired state is desired.ts's two workers;
 * its decision is reconcile.ts's. A Model's change reconciles the services that use it.
 */
import { jointInferenceServiceSpec } from '../crds/index.js';
import { findObject } from '../k8s/index.js';
import type { Kube, KubeObject } from '../k8s/index.js';
import { desiredState } from './desired.js';
import type { Desired } from './desired.js';
import { defineKind } from './engine.js';
import type { Observed, Registration } from './engine.js';
import type { WorkerSettings } from './knative-service.js';
import { reconcile } from './reconcile.js';
import { byName, byNamespace } from './lookup.js';
import { labels, roles, workerName } from './types.js';
import type { Role, ServiceObject } from './types.js';

interface Inputs {
  /** The Models of the service's namespace, by name (at least those it names). */
  models: ReadonlyMap<string, KubeObject>;
  /** The Nodes, by name (at least those its workers name or select). */
  nodes: ReadonlyMap<string, KubeObject>;
}

const empty = new Map<string, KubeObject>();

// Kubernetes label syntax: a selector outside it cannot match any Node (and the API server
// would refuse the query).
const labelName = /^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)$/;
const labelKey =
  /^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;

/** The Nodes one worker's placement names or selects (none when it is not pinned). */
async function placementCandidates(
  kube: Kube,
  worker: { nodeName?: string | undefined; nodeSelector?: Record<string, string> | undefined },
): Promise<KubeObject[]> {
  if (worker.nodeName !== undefined) {
    const node = await findObject(kube, { kind: 'node', name: worker.nodeName });
    return node === undefined ? [] : [node];
  }
  const selector = Object.entries(worker.nodeSelector ?? {});
  if (selector.length === 0) return [];
  if (!selector.every(([k, v]) => labelKey.test(k) && (v === '' || labelName.test(v)))) return [];
  const labelSelector = selector.map(([k, v]) => `${k}=${v}`).join(',');
  return (await kube.list('node', { labelSelector })).items;
}

/**
 * What one service's desired state reads, and nothing more: its Models by name and the Nodes
 * its workers name or select. An event costs a handful of objects however large the cluster
 * (the tick, which looks at every service, lists each kind once instead).
 */
async function referencedObjects(kube: Kube, service: ServiceObject): Promise<Inputs> {
  const parsed = jointInferenceServiceSpec.safeParse(service.spec);
  // desiredState names the invalid field; it needs no Model or Node for that.
  if (!parsed.success) return { models: empty, nodes: empty };
  const { edgeWorker, cloudWorker } = parsed.data;
  const namespace = service.metadata.namespace ?? '';
  const modelNames = [...new Set([edgeWorker.model.name, cloudWorker.model.name])];
  const [models, nodes] = await Promise.all([
    Promise.all(modelNames.map((name) => findObject(kube, { kind: 'model', namespace, name }))),
    Promise.all([edgeWorker, cloudWorker].map((worker) => placementCandidates(kube, worker))),
  ]);
  return {
    models: byName(models.filter((m): m is KubeObject => m !== undefined)),
    nodes: byName(nodes.flat()),
  };
}

/** A tick's inputs: every Model (by namespace) and every Node, listed once. */
async function everyModelAndNode(kube: Kube): Promise<(service: ServiceObject) => Inputs> {
  const [models, nodes] = await Promise.all([kube.list('model'), kube.list('node')]);
  const modelsByNs = byNamespace(models.items);
  const nodeMap = byName(nodes.items);
  return (service) => ({
    models: modelsByNs.get(service.metadata.namespace ?? '') ?? empty,
    nodes: nodeMap,
  });
}

function usesModel(service: ServiceObject, model: string): boolean {
  const spec = service.spec as
    Partial<Record<'edgeWorker' | 'cloudWorker', { model?: { name?: unknown } }>> | undefined;
  return spec?.edgeWorker?.model?.name === model || spec?.cloudWorker?.model?.name === model;
}

/** The engine's observation in reconcile()'s terms: the Services and taken names by role. */
function byRole(observed: Observed<ServiceObject, Inputs>) {
  const name = observed.owner.metadata.name;
  const workers: Partial<Record<Role, KubeObject>> = {};
  for (const role of roles) {
    const found = observed.owned.get(workerName(name, role));
    if (found !== undefined) workers[role] = found;
  }
  const taken = roles.filter((role) => observed.taken.includes(workerName(name, role)));
  return { service: observed.owner, workers, taken };
}

function jointInferenceKind(settings: WorkerSettings): Registration {
  return defineKind<ServiceObject, Inputs, Desired>({
    kind: 'jointInferenceService',
    selector: (name) => `${labels.service}=${name}`,
    inputs: referencedObjects,
    tickInputs: everyModelAndNode,
    desired: (service, { models, nodes }) => desiredState(service, models, nodes, settings),
    wanted: (desired) => (desired.valid ? roles.map((r) => desired.workers[r].metadata.name) : []),
    decide: (observed, desired, now, options) => reconcile(byRole(observed), desired, now, options),
    uses: [{ kind: 'model', by: usesModel }],
  });
}

export { jointInferenceKind };
