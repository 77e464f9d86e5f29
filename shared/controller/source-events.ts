/**
 * ApiServerSource (Resource mode) events: the data is the changed object. This decides which
 * resource an event concerns: the object itself, the owner of a Knative Service the controller
 * manages (by its controller reference), or the users of a Model.
 */
import { z } from 'zod';
import { ValidationError } from '../errors/index.js';
import { apiVersion, kinds } from '../k8s/index.js';
import type { ReferencedKind } from './engine.js';
import type { OwnerKind } from './ownership.js';

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

/** What an event asks to reconcile: one resource, or the resources that use a Model or Dataset. */
type Target =
  | { kind: 'owner'; owner: OwnerKind; namespace: string; name: string }
  | { kind: 'users'; of: ReferencedKind; namespace: string; name: string };

const group = apiVersion(kinds.jointInferenceService);
const ksvc = apiVersion(kinds.knativeService);

const ownerTarget =
  (owner: OwnerKind) =>
  (namespace: string, name: string): Target => ({ kind: 'owner', owner, namespace, name });

/** The controller's own kinds, by their Kubernetes kind, and what an event about one asks. */
const ownKinds = new Map<string, (namespace: string, name: string) => Target>([
  [kinds.jointInferenceService.kind, ownerTarget('jointInferenceService')],
  [kinds.model.kind, (namespace, name) => ({ kind: 'users', of: 'model', namespace, name })],
  [kinds.mlGraph.kind, ownerTarget('mlGraph')],
  [kinds.federatedLearningJob.kind, ownerTarget('federatedLearningJob')],
  [kinds.dataset.kind, (namespace, name) => ({ kind: 'users', of: 'dataset', namespace, name })],
]);

/** The owner of a Knative Service: its controller reference, if one of ours (ownership.ts). */
function ownerOf(object: KubeObjectData, namespace: string): Target | undefined {
  const controller = object.metadata.ownerReferences?.find(
    (ref) => ref.controller === true && ref.apiVersion === group,
  );
  const target = controller === undefined ? undefined : ownKinds.get(controller.kind);
  const owner = controller === undefined ? undefined : target?.(namespace, controller.name);
  return owner?.kind === 'owner' ? owner : undefined;
}

/**
 * What to reconcile for an event about `object`: undefined when the object is a Knative Service
 * the controller does not own. An object of any other kind is a wiring mistake (the
 * ApiServerSource watches more than it should): a 400 naming the kind.
 */
function targetOf(object: KubeObjectData): Target | undefined {
  const own = object.apiVersion === group ? ownKinds.get(object.kind) : undefined;
  const isKsvc = object.apiVersion === ksvc && object.kind === kinds.knativeService.kind;
  if (own === undefined && !isKsvc) {
    throw new ValidationError(
      `data.kind: ApiServerSource event for ${object.apiVersion} ${object.kind} is not handled (expected ${group} ${[...ownKinds.keys()].join(', ')}, or ${ksvc} ${kinds.knativeService.kind})`,
    );
  }
  const namespace = object.metadata.namespace;
  if (namespace === undefined) {
    throw new ValidationError(
      `data.metadata.namespace: required for ${object.kind} ${object.metadata.name}`,
    );
  }
  return own === undefined ? ownerOf(object, namespace) : own(namespace, object.metadata.name);
}

export { kubeObjectData, targetOf };
export type { KubeObjectData, Target };
