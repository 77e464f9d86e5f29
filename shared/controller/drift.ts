/**
 * How a stored Knative Service stands against the one a resource wants, for every kind the
 * engine reconciles: whether the fields the controller owns differ (and the merge patch that
 * brings them back), and the Service's readiness as Knative reports it.
 */
import type { KubeObject } from '../k8s/index.js';
import { serviceAnnotations as annotations } from './knative-service.js';

/** True when every field of `wanted` is in `actual` with the same value (arrays: same length). */
function covers(actual: unknown, wanted: unknown): boolean {
  if (Array.isArray(wanted)) {
    return (
      Array.isArray(actual) &&
      actual.length === wanted.length &&
      wanted.every((item, i) => covers(actual[i], item))
    );
  }
  if (typeof wanted === 'object' && wanted !== null) {
    if (typeof actual !== 'object' || actual === null || Array.isArray(actual)) return false;
    const record = actual as Record<string, unknown>;
    return Object.entries(wanted).every(([k, v]) => covers(record[k], v));
  }
  return actual === wanted;
}

function path(object: unknown, ...keys: string[]): unknown {
  let at = object;
  for (const k of keys) {
    if (typeof at !== 'object' || at === null) return undefined;
    at = (at as Record<string, unknown>)[k];
  }
  return at;
}

/**
 * A merge patch must name the keys to drop with null: those of the maps the controller owns that
 * are stored but no longer wanted. (Fields Knative defaults in are left alone.)
 */
function removals(
  stored: unknown,
  wanted: Record<string, string>,
  owned: (key: string) => boolean,
): Record<string, string | null> {
  const result: Record<string, string | null> = { ...wanted };
  if (typeof stored === 'object' && stored !== null) {
    for (const k of Object.keys(stored)) if (!(k in wanted) && owned(k)) result[k] = null;
  }
  return result;
}

const ownedTemplateAnnotations = new Set<string>([
  annotations.minScale,
  annotations.maxScale,
  annotations.restartedAt,
]);

function hasStale(stored: unknown, wanted: Record<string, string>, owned: (k: string) => boolean) {
  return Object.values(removals(stored, wanted, owned)).some((v) => v === null);
}

/**
 * The patch that brings the stored worker to the wanted one in the fields we own, if any differ.
 * `specChanged` is false when only metadata differs: Knative then keeps the same generation and
 * the worker stays as ready as it was.
 */
function workerDrift(
  stored: KubeObject,
  wanted: KubeObject,
): { patch: Record<string, unknown>; specChanged: boolean } | undefined {
  const storedTemplate = path(stored, 'spec', 'template');
  const wantedAnnotations = (path(wanted, 'spec', 'template', 'metadata', 'annotations') ??
    {}) as Record<string, string>;
  const wantedSelector = (path(wanted, 'spec', 'template', 'spec', 'nodeSelector') ?? {}) as Record<
    string,
    string
  >;
  const storedAnnotations = path(storedTemplate, 'metadata', 'annotations');
  const storedSelector = path(storedTemplate, 'spec', 'nodeSelector');
  const specChanged =
    !covers(stored['spec'], wanted['spec']) ||
    hasStale(storedAnnotations, wantedAnnotations, (k) => ownedTemplateAnnotations.has(k)) ||
    hasStale(storedSelector, wantedSelector, () => true);
  if (!specChanged && covers(stored.metadata, wanted.metadata)) return undefined;
  const wantedSpec = wanted['spec'] as { template: { metadata: object; spec: object } };
  const patch = {
    metadata: {
      labels: wanted.metadata.labels,
      annotations: wanted.metadata.annotations,
      ownerReferences: wanted.metadata.ownerReferences,
    },
    spec: {
      template: {
        metadata: {
          ...wantedSpec.template.metadata,
          annotations: removals(storedAnnotations, wantedAnnotations, (k) =>
            ownedTemplateAnnotations.has(k),
          ),
        },
        spec: {
          ...wantedSpec.template.spec,
          nodeSelector:
            Object.keys(wantedSelector).length === 0 && storedSelector === undefined
              ? undefined
              : removals(storedSelector, wantedSelector, () => true),
        },
      },
    },
  };
  return { patch, specChanged };
}

type Readiness = { status: 'True' | 'False' | 'Unknown'; reason: string; message: string };

/** A Knative Service's Ready condition, Unknown until it has seen its latest spec. */
function serviceReadiness(worker: KubeObject | undefined): Readiness {
  if (worker === undefined)
    return { status: 'Unknown', reason: 'Absent', message: 'no worker Service' };
  const status = worker['status'] as
    { observedGeneration?: number; conditions?: Array<Record<string, unknown>> } | undefined;
  if (status?.observedGeneration !== worker.metadata.generation) {
    return { status: 'Unknown', reason: 'Deploying', message: 'latest spec not yet rolled out' };
  }
  const ready = status?.conditions?.find((c) => c['type'] === 'Ready');
  const value = ready?.['status'];
  return {
    status: value === 'True' || value === 'False' ? value : 'Unknown',
    reason: typeof ready?.['reason'] === 'string' ? ready['reason'] : 'Deploying',
    message: typeof ready?.['message'] === 'string' ? ready['message'] : '',
  };
}

export { covers, path, workerDrift, serviceReadiness };
export type { Readiness };
