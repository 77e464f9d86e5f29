/**
 * The MLGraph kind, registered with the engine: its input is which model nodes name a Knative
 * Service or JointInferenceService that does not exist; its desired state is graph-desired.ts's
 * Services; its decision is graph-reconcile.ts's.
 */
import { mlGraphSpec } from '../crds/index.js';
import { findObject } from '../k8s/index.js';
import type { Kube } from '../k8s/index.js';
import { defineKind } from './engine.js';
import type { Registration } from './engine.js';
import { desiredGraph, graphLabels } from './graph-desired.js';
import type { GraphDesired, GraphObject } from './graph-desired.js';
import type { WorkerSettings } from './knative-service.js';
import { reconcileGraph } from './graph-reconcile.js';

/**
 * The model nodes whose Knative Service or JointInferenceService is not in the graph's
 * namespace (a model given by URL is not looked at), each said as its node. One get per named
 * model per pass, while the spec parses.
 */
async function missingModels(kube: Kube, graph: GraphObject): Promise<string[]> {
  const parsed = mlGraphSpec.safeParse(graph.spec);
  if (!parsed.success) return [];
  const namespace = graph.metadata.namespace ?? '';
  const missing: string[] = [];
  for (const node of parsed.data.nodes) {
    const { service, jointInferenceService } = node.model ?? {};
    const name = service ?? jointInferenceService;
    if (node.kind !== 'model' || name === undefined) continue;
    const kind = service !== undefined ? 'knativeService' : 'jointInferenceService';
    if ((await findObject(kube, { kind, namespace, name })) !== undefined) continue;
    const what = service !== undefined ? 'Knative Service' : 'JointInferenceService';
    missing.push(`node ${node.name}: ${what} ${namespace}/${name} not found`);
  }
  return missing;
}

function mlGraphKind(settings: WorkerSettings): Registration {
  return defineKind<GraphObject, string[], GraphDesired>({
    kind: 'mlGraph',
    selector: (name) => `${graphLabels.graph}=${name}`,
    inputs: missingModels,
    desired: (graph) => desiredGraph(graph, settings),
    wanted: (desired) => (desired.valid ? desired.services.map((s) => s.metadata.name) : []),
    decide: ({ owner, owned, taken, inputs }, desired, now, options) =>
      reconcileGraph(
        { graph: owner, services: owned, taken, missingModels: inputs },
        desired,
        now,
        options,
      ),
  });
}

export { mlGraphKind };
