/**
 * The only file that imports @kubernetes/client-node. Calls come back as plain objects or as the
 * project's typed errors: NotFoundError (404), ConflictError (409, retry with a fresh read),
 * ValidationError (400/422: the API server refused what we sent), UnavailableError (the API
 * server is unreachable, overloaded or failing: retryable).
 */
import type { CoreV1Event, V1Node, V1Secret } from '@kubernetes/client-node';
import {
  ApiException,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  VersionApi,
  Watch,
  setHeaderOptions,
} from '@kubernetes/client-node';
import {
  ConfigError,
  ConflictError,
  NotFoundError,
  UnavailableError,
  ValidationError,
} from '../errors/index.js';
import type { Env } from '../config/index.js';
import { apiVersion, kinds } from './kinds.js';
import type { KindName } from './kinds.js';

/** Any Kubernetes object, as JSON. */
interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    generation?: number;
    creationTimestamp?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: Array<Record<string, unknown>>;
  };
  [field: string]: unknown;
}

interface ObjectRef {
  kind: KindName;
  namespace?: string;
  name: string;
}

interface Kube {
  get(ref: ObjectRef): Promise<KubeObject>;
  list(
    kind: KindName,
    options?: { namespace?: string; labelSelector?: string },
  ): Promise<{ items: KubeObject[]; resourceVersion: string }>;
  create(kind: KindName, namespace: string | undefined, body: KubeObject): Promise<KubeObject>;
  /** JSON merge patch; a metadata.resourceVersion in the patch makes it conditional. */
  patch(ref: ObjectRef, patch: Record<string, unknown>): Promise<KubeObject>;
  patchStatus(ref: ObjectRef, patch: Record<string, unknown>): Promise<KubeObject>;
  delete(ref: ObjectRef): Promise<void>;
  /** Resolves when the API server answers (readiness checks). */
  ping(): Promise<void>;
}

/** The standard lookup: KUBECONFIG if set, else the in-cluster service account. */
function loadKubeConfig(env: Env = process.env): KubeConfig {
  const config = new KubeConfig();
  const file = env['KUBECONFIG'];
  if (file !== undefined && file !== '') {
    try {
      config.loadFromFile(file);
    } catch (err) {
      throw new ConfigError(
        `KUBECONFIG: cannot load ${file}: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
  } else if (env['KUBERNETES_SERVICE_HOST'] !== undefined) {
    config.loadFromCluster();
  } else {
    throw new ConfigError(
      'KUBECONFIG: not set, and not running in a cluster (no KUBERNETES_SERVICE_HOST)',
    );
  }
  return config;
}

function statusMessage(body: unknown): string {
  if (typeof body === 'string') {
    try {
      const parsed = JSON.parse(body) as { message?: unknown };
      if (typeof parsed.message === 'string') return parsed.message;
    } catch {
      return body.slice(0, 500);
    }
  }
  return 'no message';
}

/**
 * A call this adapter cannot make (an event read by name, a secret's status): the caller's bug,
 * so it passes through classify as it is rather than as a retryable "unreachable".
 */
class MisuseError extends Error {
  override readonly name = 'MisuseError';
}

/** Maps a client-node failure to the project's errors (see the file comment). */
function classify(err: unknown): Error {
  if (err instanceof MisuseError) return err;
  if (err instanceof ApiException) {
    const message = `API server: ${statusMessage(err.body)}`;
    if (err.code === 404) return new NotFoundError(message);
    if (err.code === 409) return new ConflictError(message);
    if (err.code === 400 || err.code === 422) return new ValidationError(message);
    if (err.code === 429 || err.code >= 500)
      return new UnavailableError(message, 1, { cause: err });
    return new Error(`${message} (HTTP ${err.code})`, { cause: err });
  }
  const detail = err instanceof Error ? err.message : String(err);
  return new UnavailableError(`API server unreachable: ${detail}`, 1, { cause: err });
}

async function guard<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    throw classify(err);
  }
}

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/** The typed clients the verbs call: core for nodes, secrets and events, custom for the rest. */
interface Apis {
  core: CoreV1Api;
  custom: CustomObjectsApi;
}

/** A list response as the verbs read it, whichever client answered. */
interface RawList {
  items: unknown[];
  metadata?: { resourceVersion?: string };
}

function asObject(value: unknown): KubeObject {
  return value as KubeObject;
}

/** The CustomObjectsApi coordinates of a kind, checked before any request is sent. */
function customParams(ref: { kind: KindName; namespace?: string | undefined }) {
  const kind = kinds[ref.kind];
  // Events are written and listed only; nothing reads one back by name.
  if (ref.kind === 'event') throw new MisuseError('Events support create and list only');
  if (kind.namespaced && ref.namespace === undefined)
    throw new MisuseError(`${kind.kind} needs a namespace`);
  return {
    group: kind.group,
    version: kind.version,
    plural: kind.plural,
    namespace: ref.namespace ?? '',
  };
}

async function getObject({ core, custom }: Apis, ref: ObjectRef): Promise<KubeObject> {
  if (ref.kind === 'node') return asObject(await core.readNode({ name: ref.name }));
  if (ref.kind === 'secret')
    return asObject(
      await core.readNamespacedSecret({ name: ref.name, namespace: customParams(ref).namespace }),
    );
  return asObject(await custom.getNamespacedCustomObject({ ...customParams(ref), name: ref.name }));
}

/** One list request, to whichever endpoint serves the kind in one namespace or in all. */
async function requestList(
  { core, custom }: Apis,
  kindName: KindName,
  options: { namespace?: string; labelSelector?: string },
): Promise<RawList> {
  const labelSelector = options.labelSelector;
  const kind = kinds[kindName];
  if (kindName === 'node') return await core.listNode({ labelSelector });
  if (kindName === 'secret') {
    return options.namespace === undefined
      ? await core.listSecretForAllNamespaces({ labelSelector })
      : await core.listNamespacedSecret({ namespace: options.namespace, labelSelector });
  }
  if (kindName === 'event') {
    return options.namespace === undefined
      ? await core.listEventForAllNamespaces({ labelSelector })
      : await core.listNamespacedEvent({ namespace: options.namespace, labelSelector });
  }
  if (options.namespace === undefined) {
    return (await custom.listClusterCustomObject({
      group: kind.group,
      version: kind.version,
      plural: kind.plural,
      labelSelector,
    })) as RawList;
  }
  return (await custom.listNamespacedCustomObject({
    ...customParams({ kind: kindName, namespace: options.namespace }),
    labelSelector,
  })) as RawList;
}

async function listObjects(
  apis: Apis,
  kindName: KindName,
  options: { namespace?: string; labelSelector?: string },
): Promise<{ items: KubeObject[]; resourceVersion: string }> {
  const list = await requestList(apis, kindName, options);
  return { items: list.items.map(asObject), resourceVersion: list.metadata?.resourceVersion ?? '' };
}

async function createObject(
  { core, custom }: Apis,
  kindName: KindName,
  namespace: string | undefined,
  body: KubeObject,
): Promise<KubeObject> {
  const kind = kinds[kindName];
  const full = { ...body, apiVersion: apiVersion(kind), kind: kind.kind };
  if (kindName === 'node')
    return asObject(await core.createNode({ body: full as unknown as V1Node }));
  if (kindName === 'secret')
    return asObject(
      await core.createNamespacedSecret({
        namespace: namespace ?? '',
        body: full as unknown as V1Secret,
      }),
    );
  if (kindName === 'event')
    return asObject(
      await core.createNamespacedEvent({
        namespace: namespace ?? '',
        body: full as unknown as CoreV1Event,
      }),
    );
  return asObject(
    await custom.createNamespacedCustomObject({
      ...customParams({ kind: kindName, namespace }),
      body: full,
    }),
  );
}

async function patchObject(
  { core, custom }: Apis,
  ref: ObjectRef,
  patch: Record<string, unknown>,
): Promise<KubeObject> {
  if (ref.kind === 'node')
    return asObject(await core.patchNode({ name: ref.name, body: patch }, mergePatch));
  if (ref.kind === 'secret') {
    return asObject(
      await core.patchNamespacedSecret(
        { name: ref.name, namespace: customParams(ref).namespace, body: patch },
        mergePatch,
      ),
    );
  }
  return asObject(
    await custom.patchNamespacedCustomObject(
      { ...customParams(ref), name: ref.name, body: patch },
      mergePatch,
    ),
  );
}

async function patchObjectStatus(
  { core, custom }: Apis,
  ref: ObjectRef,
  patch: Record<string, unknown>,
): Promise<KubeObject> {
  if (ref.kind === 'node')
    return asObject(await core.patchNodeStatus({ name: ref.name, body: patch }, mergePatch));
  if (ref.kind === 'secret') throw new MisuseError('Secrets have no status');
  return asObject(
    await custom.patchNamespacedCustomObjectStatus(
      { ...customParams(ref), name: ref.name, body: patch },
      mergePatch,
    ),
  );
}

async function deleteObject({ core, custom }: Apis, ref: ObjectRef): Promise<void> {
  if (ref.kind === 'node') await core.deleteNode({ name: ref.name });
  else if (ref.kind === 'secret')
    await core.deleteNamespacedSecret({ name: ref.name, namespace: customParams(ref).namespace });
  else await custom.deleteNamespacedCustomObject({ ...customParams(ref), name: ref.name });
}

/** The adapter: each verb runs inside guard, so what it throws comes back through classify. */
function createKube(config: KubeConfig): Kube {
  const custom = config.makeApiClient(CustomObjectsApi);
  const core = config.makeApiClient(CoreV1Api);
  const version = config.makeApiClient(VersionApi);
  const apis: Apis = { core, custom };
  return {
    get: (ref) => guard(() => getObject(apis, ref)),
    list: (kindName, options = {}) => guard(() => listObjects(apis, kindName, options)),
    create: (kindName, namespace, body) =>
      guard(() => createObject(apis, kindName, namespace, body)),
    patch: (ref, patch) => guard(() => patchObject(apis, ref, patch)),
    patchStatus: (ref, patch) => guard(() => patchObjectStatus(apis, ref, patch)),
    delete: (ref) => guard(() => deleteObject(apis, ref)),
    ping: () =>
      guard(async () => {
        await version.getCode();
      }),
  };
}

type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED';

/** One watch request: the changes after `resourceVersion`, until the server or `stop` ends it. */
interface KubeWatch {
  watch(
    kind: KindName,
    options: { namespace?: string; labelSelector?: string; resourceVersion: string },
    onChange: (type: WatchEventType, object: KubeObject) => void,
    /** Called once when the watch ends: undefined for a normal close, else why. */
    done: (err: Error | undefined) => void,
  ): Promise<{ stop(): void }>;
}

/**
 * Raw watches (client-node's Watch). A watch ends when the server closes it (its timeout, a
 * restart) or with an ERROR event (410 Gone when `resourceVersion` is too old): the caller lists
 * again and watches from there (shared/k8s/informer.ts).
 */
function createKubeWatch(config: KubeConfig): KubeWatch {
  const watcher = new Watch(config);
  return {
    async watch(kindName, options, onChange, done) {
      const kind = kinds[kindName];
      const base =
        kind.group === '' ? `/api/${kind.version}` : `/apis/${kind.group}/${kind.version}`;
      const path =
        options.namespace === undefined
          ? `${base}/${kind.plural}`
          : `${base}/namespaces/${options.namespace}/${kind.plural}`;
      let ended = false;
      const end = (err: Error | undefined) => {
        if (ended) return;
        ended = true;
        done(err);
      };
      const controller = await guard(() =>
        watcher.watch(
          path,
          {
            resourceVersion: options.resourceVersion,
            labelSelector: options.labelSelector,
            allowWatchBookmarks: false,
          },
          (phase: string, object: unknown) => {
            if (phase === 'ADDED' || phase === 'MODIFIED' || phase === 'DELETED') {
              onChange(phase, object as KubeObject);
            } else if (phase === 'ERROR') {
              const status = object as { code?: number; message?: string };
              end(new Error(`watch ${kind.plural}: ${status.code ?? '?'} ${status.message ?? ''}`));
            }
          },
          (err: unknown) => end(err === null || err === undefined ? undefined : classify(err)),
        ),
      );
      return {
        stop() {
          ended = true;
          controller.abort();
        },
      };
    },
  };
}

export { loadKubeConfig, createKube, createKubeWatch };
export type { Kube, KubeObject, ObjectRef, KubeWatch, WatchEventType };
