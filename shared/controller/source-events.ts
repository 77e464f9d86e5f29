/**
 * ApiServerSource (Resource mode) events: the data is the changed object. This decides which
 * JointInferenceService an event concerns: the object itself, or the owner of a worker Service.
 */
import { z } from 'zod';
import { ValidationError } from '../errors/index.js';
import { apiVersion, kinds } from '../k8s/index.js';
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

/** What an event asks to reconcile: one service, or the services using a Model. */
type Target =
  | { kind: 'service'; namespace: string; name: string }
  | { kind: 'model'; namespace: string; model: string };

/**
 * What to reconcile for an event about `object`: undefined when the object is a Knative Service
 * the controller does not manage. An object of any other kind is a wiring mistake (the
 * ApiServerSource watches more than it should): a 400 naming the kind.
 */
function targetOf(object: KubeObjectData): Target | undefined {
  const group = apiVersion(kinds.jointInferenceService);
  const ksvc = apiVersion(kinds.knativeService);
  const namespace = object.metadata.namespace;
  const is = (version: string, kind: string) =>
    object.apiVersion === version && object.kind === kind;
  const isJis = is(group, kinds.jointInferenceService.kind);
  const isModel = is(group, kinds.model.kind);
  const isKsvc = is(ksvc, kinds.knativeService.kind);
  if (!isJis && !isKsvc && !isModel) {
    throw new ValidationError(
      `data.kind: ApiServerSource event for ${object.apiVersion} ${object.kind} is not handled (expected ${group} ${kinds.jointInferenceService.kind} or ${kinds.model.kind}, or ${ksvc} ${kinds.knativeService.kind})`,
    );
  }
  if (namespace === undefined) {
    throw new ValidationError(
      `data.metadata.namespace: required for ${object.kind} ${object.metadata.name}`,
    );
  }
  if (isJis) return { kind: 'service', namespace, name: object.metadata.name };
  if (isModel) return { kind: 'model', namespace, model: object.metadata.name };
  const owner = object.metadata.ownerReferences?.find(
    (ref) =>
      ref.controller === true &&
      ref.apiVersion === group &&
      ref.kind === kinds.jointInferenceService.kind,
  );
  if (owner !== undefined) return { kind: 'service', namespace, name: owner.name };
  const byLabel = object.metadata.labels?.[labels.service];
  if (object.metadata.labels?.[labels.managedBy] === managerName && byLabel !== undefined) {
    return { kind: 'service', namespace, name: byLabel };
  }
  return undefined;
}

export { kubeObjectData, targetOf };
export type { KubeObjectData, Target };
