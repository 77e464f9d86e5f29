/**
 * upstream-status: an authenticated report is recorded in Redis (exactly once per report id),
 * then the service's status subresource is brought up to the Redis totals with a write that is
 * conditional on the resourceVersion it read, retried on conflict. Reading the totals after the
 * resource means a successful write never carries older totals than a write before it.
 */
import { createHash } from 'node:crypto';
import { ExponentialBackoff, handleType, retry } from 'cockatiel';
import type { RetryPolicy } from 'cockatiel';
import {
  ConflictError,
  ForbiddenError,
  NotFoundError,
  UnavailableError,
  ValidationError,
} from '../errors/index.js';
import { covers, placementNodes } from '../controller/index.js';
import type { ServiceObject } from '../controller/index.js';
import type { Kube, KubeObject } from '../k8s/index.js';
import type { WorkerMessage } from '../messages/worker-message.js';
import { coalescing } from './coalesce.js';
import { qualityNames } from './counters.js';
import type { ReportCounters, Totals } from './counters.js';

interface UpstreamOptions {
  kube: Kube;
  counters: ReportCounters;
  /** Status write attempts before the report is answered 503 (it is recorded; a retry syncs). */
  attempts: number;
  now?: () => Date;
}

interface ReportInput {
  namespace: string;
  name: string;
  /** The authenticated node. */
  node: string;
  message: WorkerMessage;
  /** The report's id (the event's, the message's, or its content's), unique per node. */
  id: string;
}

interface ReportResult {
  applied: boolean;
  status: Record<string, unknown>;
}

/** count / inferenceNumber as the CRD takes it: 6 decimals, within [0, 1]. */
function ratio(count: number, inferenceNumber: number): number {
  return inferenceNumber === 0 ? 0 : Math.min(1, Number((count / inferenceNumber).toFixed(6)));
}

/** The status fields upstream-status owns, from the totals. */
function statusFromTotals(totals: Totals): Record<string, unknown> {
  const { uploaded, inferenceNumber, hardExampleNumber, shadowNumber } = totals.counters;
  const workers: Record<string, unknown> = {};
  for (const [role, report] of Object.entries(totals.workers)) {
    // null removes a field the previous report had and this one does not (merge patch).
    workers[role] = {
      state: report.state,
      reportTime: report.reportTime,
      exitCode: report.exitCode ?? null,
      message: report.message ?? null,
    };
  }
  let quality: Record<string, unknown> | undefined;
  if (totals.quality !== undefined) {
    const latest: Record<string, unknown> = totals.quality;
    // The latest report replaces the whole of the last one: null drops what it no longer says.
    quality = Object.fromEntries(
      [...qualityNames, 'reportTime'].map((field) => [field, latest[field] ?? null]),
    );
  }
  return {
    uploadCount: uploaded,
    inferenceNumber,
    hardExampleNumber,
    // Clamped: totals recorded before reports had to pair hardExampleNumber with
    // inferenceNumber can hold more hard examples than inferences, and a ratio above the CRD's
    // maximum of 1 would make every later status write of the service fail.
    offloadRatio: ratio(hardExampleNumber, inferenceNumber),
    shadowCount: shadowNumber,
    // Clamped too: reports keep shadowNumber within inferenceNumber, but a ratio the CRD refuses
    // would block every later status write, whatever totals it came from.
    shadowRatio: ratio(shadowNumber, inferenceNumber),
    ...(Object.keys(workers).length > 0 ? { workers } : {}),
    ...(quality === undefined ? {} : { quality }),
  };
}

/** Merge-patch nulls mean "absent": compare without them. */
function withoutNulls(value: unknown): unknown {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return value;
  return Object.fromEntries(
    Object.entries(value)
      .filter(([, v]) => v !== null)
      .map(([k, v]) => [k, withoutNulls(v)]),
  );
}

function serviceTag(service: ServiceObject): string {
  const { namespace = '', name, uid = '' } = service.metadata;
  return `${namespace}/${name}/${uid}`;
}

/** A report without an id is identified by its content: an identical resend is a duplicate. */
function contentId(node: string, message: WorkerMessage): string {
  return createHash('sha256')
    .update(`${node}\n${JSON.stringify(message)}`)
    .digest('hex');
}

async function getService(
  kube: Pick<Kube, 'get'>,
  namespace: string,
  name: string,
): Promise<ServiceObject> {
  try {
    return await kube.get({ kind: 'jointInferenceService', namespace, name });
  } catch (err) {
    if (err instanceof NotFoundError) {
      throw new NotFoundError(`jointinferenceservice ${namespace}/${name} not found`);
    }
    throw err;
  }
}

async function nodeList(kube: Pick<Kube, 'get'>, node: string): Promise<KubeObject[]> {
  try {
    return [await kube.get({ kind: 'node', name: node })];
  } catch (err) {
    if (err instanceof NotFoundError) return [];
    throw err;
  }
}

/** Refuses a report from a node that does not run the reporting worker of `service`. */
async function checkPlacement(
  kube: Pick<Kube, 'get'>,
  service: ServiceObject,
  input: ReportInput,
): Promise<void> {
  const spec = service.spec as
    | Record<
        'edgeWorker' | 'cloudWorker',
        { nodeName?: string; nodeSelector?: Record<string, string> } | undefined
      >
    | undefined;
  const role = input.message.worker;
  const worker = spec?.[role === 'edge' ? 'edgeWorker' : 'cloudWorker'] ?? {};
  // A node token vouches only for the node; what the node may report is where the worker
  // runs. A worker pinned nowhere (an empty nodeSelector pins nothing, as in placementNodes)
  // runs on no node in particular, so no node can speak for it.
  const selected = Object.keys(worker.nodeSelector ?? {}).length > 0;
  if (worker.nodeName === undefined && !selected) {
    throw new ForbiddenError(
      `the ${role} worker of ${input.namespace}/${input.name} is not pinned to a node (no nodeName or nodeSelector), so no node may report for it`,
    );
  }
  // A selector is checked against the reporting node's labels.
  const nodes = worker.nodeName === undefined ? await nodeList(kube, input.node) : [];
  const allowed = placementNodes(worker, nodes) ?? [];
  if (!allowed.includes(input.node)) {
    throw new ForbiddenError(
      `node ${input.node} does not run the ${role} worker of ${input.namespace}/${input.name}`,
    );
  }
}

interface SyncDeps {
  kube: Pick<Kube, 'get' | 'patchStatus'>;
  counters: Pick<ReportCounters, 'totals'>;
}

/** One conditional status write from the current totals; the status it leaves. */
async function writeStatus(
  { kube, counters }: SyncDeps,
  namespace: string,
  name: string,
): Promise<Record<string, unknown>> {
  const service = await getService(kube, namespace, name);
  const status = statusFromTotals(await counters.totals(serviceTag(service)));
  if (covers(service.status, withoutNulls(status))) return status;
  try {
    await kube.patchStatus(
      { kind: 'jointInferenceService', namespace, name },
      { metadata: { resourceVersion: service.metadata.resourceVersion }, status },
    );
  } catch (err) {
    // The API server refusing a status we computed is our bug, not the reporter's: a 400
    // would tell it not to retry a report that is recorded but never reaches the status.
    // A plain Error answers 500 and is logged with the API server's reason.
    if (err instanceof ValidationError) {
      throw new Error(`status write of ${namespace}/${name} refused: ${err.message}`, {
        cause: err,
      });
    }
    throw err;
  }
  return status;
}

/** The status write of `key` (namespace/name), retried on conflict. */
async function syncStatus(
  deps: SyncDeps & { conflictRetry: RetryPolicy; attempts: number },
  key: string,
): Promise<Record<string, unknown>> {
  const [namespace = '', name = ''] = key.split('/');
  try {
    return await deps.conflictRetry.execute(() => writeStatus(deps, namespace, name));
  } catch (err) {
    if (err instanceof ConflictError) {
      throw new UnavailableError(
        `status of ${namespace}/${name} kept changing under ${deps.attempts} writes; the report is recorded, retry to sync`,
      );
    }
    throw err;
  }
}

function createUpstream(options: UpstreamOptions) {
  const { kube, counters, attempts } = options;
  const now = options.now ?? (() => new Date());
  const conflictRetry = retry(handleType(ConflictError), {
    maxAttempts: attempts - 1,
    backoff: new ExponentialBackoff({ initialDelay: 5, maxDelay: 250 }),
  });
  const sync = coalescing((key: string) =>
    syncStatus({ kube, counters, conflictRetry, attempts }, key),
  );

  return {
    async report(input: ReportInput): Promise<ReportResult> {
      const service = await getService(kube, input.namespace, input.name);
      await checkPlacement(kube, service, input);
      const applied = await counters.record(
        serviceTag(service),
        // Bound to the authenticated node, never to a sender-chosen source: a report resent
        // under another source is still the same report.
        { source: `node/${input.node}`, id: input.id },
        { node: input.node, id: input.message.reporter ?? input.node },
        input.message,
        now().toISOString(),
      );
      const status = await sync(`${input.namespace}/${input.name}`);
      return { applied, status };
    },
    contentId,
  };
}

type Upstream = ReturnType<typeof createUpstream>;

export { createUpstream, statusFromTotals };
export type { Upstream, UpstreamOptions, ReportInput, ReportResult };
