/**
 * The one ownership rule of the control plane: a Knative Service belongs to a resource when its
 * controller ownerReference names that resource's kind, name and uid. The uid makes a resource
 * deleted and created again under the same name a new owner: the old one's Services, waiting for
 * garbage collection, are not adopted. The same reference is what cascades deletion.
 */
import { apiVersion, kinds } from '../k8s/index.js';
import type { KubeObject } from '../k8s/index.js';

/** The kinds that own Knative Services, each reconciled by the engine (engine.ts). */
type OwnerKind = 'jointInferenceService' | 'mlGraph' | 'federatedLearningJob';

/** The reference from a Service to the resource that owns it. */
function ownerReference(kind: OwnerKind, owner: KubeObject) {
  return {
    apiVersion: apiVersion(kinds[kind]),
    kind: kinds[kind].kind,
    name: owner.metadata.name,
    uid: owner.metadata.uid ?? '',
    controller: true,
    blockOwnerDeletion: true,
  };
}

/** `object` is controlled by `owner` (this incarnation of it). */
function controlledBy(object: KubeObject, kind: OwnerKind, owner: KubeObject): boolean {
  return (object.metadata.ownerReferences ?? []).some(
    (ref) =>
      ref['controller'] === true &&
      ref['kind'] === kinds[kind].kind &&
      ref['name'] === owner.metadata.name &&
      (owner.metadata.uid === undefined || ref['uid'] === owner.metadata.uid),
  );
}

export { ownerReference, controlledBy };
export type { OwnerKind };
