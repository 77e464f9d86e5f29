/**
 * The Knative Service every kind deploys its workers as: one image (FUNCTION_TARGET picks the
 * function), one port, the readiness probe, the worker Secret as environment, and the controller
 * ownerReference that makes it the resource's (cascade deletion). A kind says only what differs:
 * its labels, its environment, its placement and scale.
 */
import { apiVersion, kinds } from '../k8s/index.js';
import type { KubeObject } from '../k8s/index.js';
import { ownerReference } from './ownership.js';
import type { OwnerKind } from './ownership.js';

/** Operator-wide settings for the workers (see functions/reconcile-tick for the variables). */
interface WorkerSettings {
  /** The one image of all functions; FUNCTION_TARGET picks the function. */
  image: string;
  /** Where edge workers report (upstream-status's URL as edge nodes reach it). */
  upstreamStatusUrl: string | undefined;
  /** A Secret whose keys become every worker's environment (e.g. REDIS_URL). */
  workerSecret: string | undefined;
  /** The Broker's address, for workers that tell the control plane of progress (optional). */
  eventsUrl?: string | undefined;
}

/** On every Service the control plane deploys, so one list call per tick finds them all. */
const managedBy = Object.freeze({ label: 'app.kubernetes.io/managed-by', value: 'edgeai' });

/** Annotations the controller owns on the Services it deploys. */
const serviceAnnotations = Object.freeze({
  generation: 'edgeai.io/generation',
  restartedAt: 'edgeai.io/restarted-at',
  minScale: 'autoscaling.knative.dev/min-scale',
  maxScale: 'autoscaling.knative.dev/max-scale',
});

/** A container variable; a kind may narrow `name` to the variables its workers read. */
type EnvVar<Name extends string = string> =
  | { name: Name; value: string }
  | { name: Name; valueFrom: Record<string, Record<string, unknown>> };

interface ServiceShape {
  kind: OwnerKind;
  owner: KubeObject;
  name: string;
  /** On the Service and its pods (the managed-by label is added). */
  labels: Record<string, string>;
  /** Reached only from inside the cluster (Knative's cluster-local visibility). */
  clusterLocal: boolean;
  env: readonly EnvVar[];
  nodeSelector?: Record<string, string>;
  templateAnnotations?: Record<string, string>;
  /** How long a request may take (Knative's default is 300 s). */
  timeoutSeconds?: number;
  /** False: no Secret as environment (a worker on an edge node that needs no credentials). */
  secret?: boolean;
  settings: WorkerSettings;
}

const workerPort = 8080;

/** The Knative Service of `shape`, owned by `shape.owner`. */
function knativeService(shape: ServiceShape): KubeObject {
  const { owner, settings } = shape;
  const podLabels = { [managedBy.label]: managedBy.value, ...shape.labels };
  const serviceLabels = shape.clusterLocal
    ? { ...podLabels, 'networking.knative.dev/visibility': 'cluster-local' }
    : podLabels;
  const nodeSelector = shape.nodeSelector ?? {};
  return {
    apiVersion: apiVersion(kinds.knativeService),
    kind: kinds.knativeService.kind,
    metadata: {
      name: shape.name,
      namespace: owner.metadata.namespace ?? '',
      labels: serviceLabels,
      annotations: { [serviceAnnotations.generation]: String(owner.metadata.generation ?? 0) },
      ownerReferences: [ownerReference(shape.kind, owner)],
    },
    spec: {
      template: {
        metadata: { labels: podLabels, annotations: shape.templateAnnotations ?? {} },
        spec: {
          ...(Object.keys(nodeSelector).length > 0 ? { nodeSelector } : {}),
          ...(shape.timeoutSeconds === undefined ? {} : { timeoutSeconds: shape.timeoutSeconds }),
          containers: [
            {
              name: 'worker',
              image: settings.image,
              ports: [{ containerPort: workerPort }],
              env: shape.env,
              ...(settings.workerSecret === undefined || shape.secret === false
                ? {}
                : { envFrom: [{ secretRef: { name: settings.workerSecret, optional: true } }] }),
              readinessProbe: { httpGet: { path: '/health/readiness' } },
            },
          ],
        },
      },
    },
  };
}

export { knativeService, managedBy, serviceAnnotations };
export type { WorkerSettings, EnvVar };
