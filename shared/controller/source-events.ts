/**
 * ApiServerSource (Resource mode) events: the data is the changed object. This decides which
 * JointInferenceService or MLGraph an event concerns: the object itself, or the owner of a
 * Knative Service the controller manages.
 */
import { z } from 'zod';
import { ValidationError } from '../errors/index.js';
import { apiVersion, kinds } from '../k8s/index.js';
import { graphLabels } from './graph-desired.js';
import { labels, managerName } from './types.js';

/** The part of a Kubernetes object the controllers look at; the rest passes through. */
const kubeObjectData = z
  .object({
    apiVersion: z.string().min(1),
    kind: z.string().min(1),
    metadata: z
      .object({
        name: z.string().min(1).max(253),
        namespace: z.string().min(1).max(63).optional(),
        uid: z.string().optional(),
        generation: z.number().int().optional(),
        labels: z.record(z.string(), z.string()).optional(),
        ownerReferences: z
          .array(
            z.looseObject({
              apiVersion: z.string(),
              kind: z.string(),
              name: z.string(),
              controller: z.boolean().optional(),
            }),
          )
          .optional(),
      })
      .loose(),
  })
  .loose();

type KubeObjectData = z.output<typeof kubeObjectData>;

/** What an event asks to reconcile: one service, the services using a Model, or one graph. */
type Target =
  | { kind: 'service'; namespace: string; name: string }
  | { kind: 'model'; namespace: string; model: string }
  | { kind: 'graph'; namespace: string; name: string };

const group = apiVersion(kinds.jointInferenceService);
const ksvc = apiVersion(kinds.knativeService);

/** The controller's own kinds, and what an event about each of them asks for. */
const ownKinds: ReadonlyArray<{
  kind: string;
  target: (namespace: string, name: string) => Target;
}> = [
  {
    kind: kinds.jointInferenceService.kind,
    target: (namespace, name) => ({ kind: 'service', namespace, name }),
  },
  { kind: kinds.model.kind, target: (namespace, model) => ({ kind: 'model', namespace, model }) },
  { kind: kinds.mlGraph.kind, target: (namespace, name) => ({ kind: 'graph', namespace, name }) },
];

/** The owner of a Knative Service: its controller reference, else the labels it was made with. */
function ownerOf(object: KubeObjectData, namespace: string): Target | undefined {
  const controller = object.metadata.ownerReferences?.find(
    (ref) => ref.controller === true && ref.apiVersion === group,
  );
  if (controller?.kind === kinds.jointInferenceService.kind)
    return { kind: 'service', namespace, name: controller.name };
  if (controller?.kind === kinds.mlGraph.kind)
    return { kind: 'graph', namespace, name: controller.name };
  const objectLabels = object.metadata.labels ?? {};
  if (objectLabels[labels.managedBy] !== managerName) return undefined;
  const service = objectLabels[labels.service];
  if (service !== undefined) return { kind: 'service', namespace, name: service };
  const graph = objectLabels[graphLabels.graph];
  if (graph !== undefined) return { kind: 'graph', namespace, name: graph };
  return undefined;
}

/**
 * What to reconcile for an event about `object`: undefined when the object is a Knative Service
 * the controller does not manage. An object of any other kind is a wiring mistake (the
 * ApiServerSource watches more than it should): a 400 naming the kind.
 */
function targetOf(object: KubeObjectData): Target | undefined {
  const own =
    object.apiVersion === group ? ownKinds.find((k) => k.kind === object.kind) : undefined;
  const isKsvc = object.apiVersion === ksvc && object.kind === kinds.knativeService.kind;
  if (own === undefined && !isKsvc) {
    throw new ValidationError(
      `data.kind: ApiServerSource event for ${object.apiVersion} ${object.kind} is not handled (expected ${group} ${ownKinds.map((k) => k.kind).join(', ')}, or ${ksvc} ${kinds.knativeService.kind})`,
    );
  }
  const namespace = object.metadata.namespace;
  if (namespace === undefined) {
    throw new ValidationError(
      `data.metadata.namespace: required for ${object.kind} ${object.metadata.name}`,
    );
  }
  return own === undefined
    ? ownerOf(object, namespace)
    : own.target(namespace, object.metadata.name);
}

export { kubeObjectData, targetOf };
export type { KubeObjectData, Target };
