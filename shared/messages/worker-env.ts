/**
 * The inference workers' environment: a contract between reconcile-tick, which writes it on the
 * workers' Knative Services (shared/controller/desired.ts), and the workers, which read it
 * (shared/inference/config.ts). Both sides are typed by these names, so a variable renamed on one
 * side fails to compile on the other: desired.ts writes only `WorkerEnvName`s, and config.ts's
 * schemas must read every name in `servingEnv` and `edgeEnv`.
 */

/** Written for both workers; read by the serving part of the worker config. */
const servingEnv = [
  'MODEL_NAME',
  'MODEL_URL',
  'MODEL_SHA256',
  'WORKER_PARAMETERS',
  'TASK',
] as const;

/** Written for the edge worker; read by its config. EDGEAI_SERVICE is written for both. */
const edgeEnv = [
  'EDGEAI_SERVICE',
  'HEM_NAME',
  'HEM_PARAMETERS',
  'MINING_MODE',
  'OFFLOAD_MODE',
  'OFFLOAD_DEADLINE_MS',
  'CLOUD_FALLBACK',
  'ACCURACY_OBJECTIVE',
  'SHADOW_RATE',
  'CLOUD_URL',
  'CLOUD_MODEL_NAME',
  'UPSTREAM_STATUS_URL',
  'EDGEAI_NODE',
  'EDGEAI_NODE_TOKEN',
] as const;

/**
 * Written, but not read by the worker config: FUNCTION_TARGET picks the function (shared/config),
 * NODE_OPTIONS is node's, EDGEAI_WORKER and MODEL_FORMAT say what the Service is to whoever
 * reads it.
 */
const runtimeEnv = ['FUNCTION_TARGET', 'NODE_OPTIONS', 'EDGEAI_WORKER', 'MODEL_FORMAT'] as const;

type ServingEnvName = (typeof servingEnv)[number];
type EdgeEnvName = (typeof edgeEnv)[number];
type WorkerEnvName = ServingEnvName | EdgeEnvName | (typeof runtimeEnv)[number];

/** Values by name, as desired.ts writes them (undefined: not set). */
type WorkerEnv = Partial<Record<WorkerEnvName, string | number | undefined>>;

/**
 * The V8 flags edge and cloud workers run with: reconcile-tick sets them as NODE_OPTIONS on the
 * workers' Knative Services, and bench/edge-infer runs its worker with them. A worker taking
 * large batches allocates hundreds of MB/s of short-lived objects and buffers; with V8's default
 * young generation it collects it every ~25 ms (`--trace-gc`), and those pauses make the tail of
 * small requests served beside large ones. A 32 MB semi-space collects less often.
 */
const inferenceNodeOptions = '--max-semi-space-size=32';

export { servingEnv, edgeEnv, runtimeEnv, inferenceNodeOptions };
export type { ServingEnvName, EdgeEnvName, WorkerEnvName, WorkerEnv };
