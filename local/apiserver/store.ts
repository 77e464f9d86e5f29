/**
 * The state behind the development API server: objects by type, namespace and name, with the
 * Kubernetes semantics the control plane relies on — resourceVersion (global, monotonically
 * increasing) and optimistic concurrency, generation bumped on spec changes only, the status
 * subresource split, ownerReference garbage collection, and watch events with a replay window.
 */
import { randomUUID } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { PatchError, applyPatch } from './patch.js';
import type { PatchType } from './patch.js';
import { matches } from './selector.js';
import type { Requirement } from './selector.js';

/** A served resource type. */
interface ResourceType {
  group: string;
  version: string;
  plural: string;
  kind: string;
  namespaced: boolean;
  /** Has a /status subresource: status and the rest are written separately. */
  status: boolean;
}

interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

interface ObjectMeta {
  name: string;
  namespace?: string;
  uid: string;
  resourceVersion: string;
  generation: number;
  creationTimestamp: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: OwnerReference[];
  [field: string]: unknown;
}

interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
  [field: string]: unknown;
}

type EventType = 'ADDED' | 'MODIFIED' | 'DELETED';

interface WatchEvent {
  type: EventType;
  object: KubeObject;
  resource: ResourceType;
  rv: number;
  /**
   * MODIFIED: the object before it (a selector watch that loses the object is sent this state
   * as DELETED, as Kubernetes does).
   */
  previous?: KubeObject;
}

/** A failure the server turns into a Status object (`details` as kube fills them, if any). */
class ApiError extends Error {
  constructor(
    readonly code: number,
    readonly reason:
      | 'NotFound'
      | 'AlreadyExists'
      | 'Conflict'
      | 'Invalid'
      | 'BadRequest'
      | 'Gone'
      | 'NotAcceptable'
      | 'UnsupportedMediaType'
      | 'MethodNotAllowed',
    message: string,
    readonly details?: Readonly<Record<string, unknown>>,
  ) {
    super(message);
  }
}

/**
 * What the server checks a write with, after the patch is applied and before it is stored: the
 * candidate object in, the object to store out (pruned, defaulted), or an ApiError.
 */
type Admit = (
  candidate: Record<string, unknown>,
  subresource: 'status' | undefined,
) => Record<string, unknown>;

/** How a write is checked, and whether it is kept (dryRun: everything but the commit). */
interface WriteOptions {
  admit?: Admit;
  dryRun?: boolean;
}

const dnsSubdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const historyLimit = 10_000;

function apiVersionOf(type: ResourceType): string {
  return type.group === '' ? type.version : `${type.group}/${type.version}`;
}

function typeKey(type: ResourceType): string {
  return `${type.group}/${type.plural}`;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The defaults kube's built-in kinds get on create: a Secret's type is Opaque. */
function defaults(type: ResourceType, object: Record<string, unknown>): Record<string, unknown> {
  if (type.kind === 'Secret' && type.group === '' && object['type'] === undefined)
    return { ...object, type: 'Opaque' };
  return object;
}

/** Everything but metadata and status: what a generation counts changes of. */
function specOf(object: Record<string, unknown>): Record<string, unknown> {
  const { metadata: _m, status: _s, apiVersion: _a, kind: _k, ...rest } = object;
  return rest;
}

/**
 * A Secret's `stringData` is write-only, as in Kubernetes: its keys are merged into `data`
 * (base64), over the same keys there, and the field is not stored.
 */
function foldStringData(
  type: ResourceType,
  object: Record<string, unknown>,
): Record<string, unknown> {
  const strings = object['stringData'];
  if (type.kind !== 'Secret' || strings === undefined || strings === null) return object;
  if (typeof strings !== 'object' || Array.isArray(strings)) {
    throw new ApiError(400, 'BadRequest', 'Secret stringData: expected a map of strings');
  }
  const data = { ...((object['data'] as Record<string, string> | undefined) ?? {}) };
  for (const [key, value] of Object.entries(strings as Record<string, unknown>)) {
    if (!/^[-._a-zA-Z0-9]+$/.test(key)) {
      throw new ApiError(
        422,
        'Invalid',
        `Secret stringData[${key}]: a valid config key must consist of alphanumeric characters, '-', '_' or '.'`,
      );
    }
    if (typeof value !== 'string') {
      throw new ApiError(400, 'BadRequest', `Secret stringData[${key}]: expected a string`);
    }
    data[key] = Buffer.from(value, 'utf8').toString('base64');
  }
  const { stringData: _written, ...rest } = object;
  return { ...rest, data };
}

class Store {
  readonly #objects = new Map<string, KubeObject>();
  readonly #history: WatchEvent[] = [];
  readonly #listeners = new Set<(event: WatchEvent) => void>();
  #revision = 0;

  constructor(private readonly now: () => Date = () => new Date()) {}

  get revision(): number {
    return this.#revision;
  }

  /** The oldest revision a watch can resume after; older ones get 410 Gone. */
  get oldestResumable(): number {
    return this.#history[0] === undefined ? this.#revision : this.#history[0].rv - 1;
  }

  #key(type: ResourceType, namespace: string | undefined, name: string): string {
    return `${typeKey(type)}|${type.namespaced ? (namespace ?? '') : ''}|${name}`;
  }

  #emit(type: EventType, object: KubeObject, resource: ResourceType, previous?: KubeObject): void {
    const event: WatchEvent = {
      type,
      object: structuredClone(object),
      resource,
      rv: this.#revision,
    };
    if (previous !== undefined) event.previous = structuredClone(previous);
    this.#history.push(event);
    if (this.#history.length > historyLimit) this.#history.shift();
    for (const listener of this.#listeners) listener(event);
  }

  #require(type: ResourceType, namespace: string | undefined, name: string): KubeObject {
    const object = this.#objects.get(this.#key(type, namespace, name));
    if (object === undefined) {
      throw new ApiError(
        404,
        'NotFound',
        `${type.plural}.${type.group || 'core'} "${name}" not found`,
      );
    }
    return object;
  }

  #validate(
    type: ResourceType,
    namespace: string | undefined,
    body: unknown,
  ): Record<string, unknown> {
    if (!isRecord(body) || !isRecord(body['metadata'])) {
      throw new ApiError(400, 'BadRequest', 'the body must be an object with metadata');
    }
    const meta = body['metadata'];
    if (
      typeof meta['name'] !== 'string' ||
      !dnsSubdomain.test(meta['name']) ||
      meta['name'].length > 253
    ) {
      throw new ApiError(
        422,
        'Invalid',
        `${type.kind} "${String(meta['name'])}" is invalid: metadata.name: must be a lowercase RFC 1123 subdomain`,
      );
    }
    if (type.namespaced && meta['namespace'] !== undefined && meta['namespace'] !== namespace) {
      throw new ApiError(
        400,
        'BadRequest',
        `the namespace of the object (${JSON.stringify(meta['namespace'])}) does not match the namespace on the request (${namespace})`,
      );
    }
    if (body['kind'] !== undefined && body['kind'] !== type.kind) {
      throw new ApiError(
        400,
        'BadRequest',
        `kind ${JSON.stringify(body['kind'])} does not match ${type.kind}`,
      );
    }
    return body;
  }

  get(type: ResourceType, namespace: string | undefined, name: string): KubeObject {
    return structuredClone(this.#require(type, namespace, name));
  }

  list(
    type: ResourceType,
    namespace: string | undefined,
    selector: readonly Requirement[],
  ): KubeObject[] {
    const items: KubeObject[] = [];
    const prefix = `${typeKey(type)}|`;
    for (const [key, object] of this.#objects) {
      if (!key.startsWith(prefix)) continue;
      if (namespace !== undefined && type.namespaced && object.metadata.namespace !== namespace)
        continue;
      if (!matches(selector, object.metadata.labels ?? {})) continue;
      items.push(structuredClone(object));
    }
    // etcd's key order, as kube-apiserver lists: by namespace, then name.
    const key = (o: KubeObject) => `${o.metadata.namespace ?? ''}/${o.metadata.name}`;
    return items.sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
  }

  create(
    type: ResourceType,
    namespace: string | undefined,
    body: unknown,
    options: WriteOptions = {},
  ): KubeObject {
    const checked = this.#validate(type, namespace, body);
    const admitted = options.admit?.(checked, undefined) ?? checked;
    const input = defaults(type, foldStringData(type, admitted));
    const meta = input['metadata'] as Record<string, unknown>;
    const name = meta['name'] as string;
    const key = this.#key(type, namespace, name);
    if (this.#objects.has(key)) {
      throw new ApiError(
        409,
        'AlreadyExists',
        `${type.plural}.${type.group || 'core'} "${name}" already exists`,
      );
    }
    const object = {
      ...structuredClone(input),
      apiVersion: apiVersionOf(type),
      kind: type.kind,
      metadata: {
        ...structuredClone(meta),
        name,
        ...(type.namespaced ? { namespace } : {}),
        uid: randomUUID(),
        resourceVersion: options.dryRun === true ? '' : String(this.#revision + 1),
        generation: 1,
        creationTimestamp: this.now()
          .toISOString()
          .replace(/\.\d{3}Z$/, 'Z'),
      },
    } as KubeObject;
    if (options.dryRun === true) return object;
    this.#revision++;
    this.#objects.set(key, object);
    this.#emit('ADDED', object, type);
    return structuredClone(object);
  }

  /**
   * Writes a new version of an object (PUT, or a patch already applied). With the status
   * subresource, a main write keeps the stored status and a /status write keeps everything else.
   */
  #write(
    type: ResourceType,
    current: KubeObject,
    candidate: Record<string, unknown>,
    subresource: 'status' | undefined,
    options: WriteOptions,
  ): KubeObject {
    const next = options.admit?.(candidate, subresource) ?? candidate;
    const sent = (next['metadata'] as Record<string, unknown> | undefined)?.['resourceVersion'];
    if (sent !== undefined && sent !== current.metadata.resourceVersion) {
      throw new ApiError(
        409,
        'Conflict',
        `Operation cannot be fulfilled on ${type.plural}.${type.group || 'core'} "${current.metadata.name}": the object has been modified; please apply your changes to the latest version and try again`,
      );
    }
    let merged: Record<string, unknown>;
    if (subresource === 'status') {
      merged = { ...structuredClone(current), status: structuredClone(next['status']) };
    } else {
      merged = foldStringData(type, structuredClone(next));
      if (type.status) {
        if (current['status'] === undefined) delete merged['status'];
        else merged['status'] = structuredClone(current['status']);
      }
    }
    const meta = { ...(merged['metadata'] as Record<string, unknown>) };
    const kept = current.metadata;
    const generation = isDeepStrictEqual(specOf(merged), specOf(current))
      ? kept.generation
      : kept.generation + 1;
    const object = {
      ...merged,
      apiVersion: apiVersionOf(type),
      kind: type.kind,
      metadata: {
        ...(subresource === 'status' ? kept : meta),
        name: kept.name,
        ...(type.namespaced ? { namespace: kept.namespace } : {}),
        uid: kept.uid,
        creationTimestamp: kept.creationTimestamp,
        generation,
        resourceVersion: kept.resourceVersion,
      },
    } as KubeObject;
    // A write that changes nothing is not an event (and keeps its resourceVersion), as in Kubernetes.
    if (isDeepStrictEqual(object, current)) return structuredClone(current);
    if (options.dryRun === true) return object;
    this.#revision++;
    object.metadata.resourceVersion = String(this.#revision);
    this.#objects.set(this.#key(type, kept.namespace, kept.name), object);
    this.#emit('MODIFIED', object, type, current);
    return structuredClone(object);
  }

  replace(
    type: ResourceType,
    namespace: string | undefined,
    name: string,
    body: unknown,
    subresource?: 'status',
    options: WriteOptions = {},
  ): KubeObject {
    const current = this.#require(type, namespace, name);
    const input = this.#validate(type, namespace, body);
    if ((input['metadata'] as Record<string, unknown>)['name'] !== name) {
      throw new ApiError(
        400,
        'BadRequest',
        `the name of the object does not match the name on the URL (${name})`,
      );
    }
    return this.#write(type, current, input, subresource, options);
  }

  /**
   * Applies a patch of `patchType` to the stored object. A resourceVersion the patch sets makes
   * it conditional (409 when stale); otherwise it applies to whatever is stored.
   */
  patch(
    type: ResourceType,
    namespace: string | undefined,
    name: string,
    patch: { type: PatchType; body: unknown },
    subresource?: 'status',
    options: WriteOptions = {},
  ): KubeObject {
    const current = this.#require(type, namespace, name);
    let patched: unknown;
    try {
      patched = applyPatch(patch.type, current, patch.body);
    } catch (err) {
      if (!(err instanceof PatchError)) throw err;
      throw new ApiError(err.code, err.code === 400 ? 'BadRequest' : 'Invalid', err.message);
    }
    if (!isRecord(patched) || !isRecord(patched['metadata']))
      throw new ApiError(422, 'Invalid', 'the patched object has no metadata');
    if (patched['metadata']['resourceVersion'] === undefined) {
      patched['metadata']['resourceVersion'] = current.metadata.resourceVersion;
    }
    return this.#write(type, current, patched, subresource, options);
  }

  /** Deletes, then garbage-collects dependents whose last owner this was (background policy). */
  delete(
    type: ResourceType,
    namespace: string | undefined,
    name: string,
    types: readonly ResourceType[],
    options: { dryRun?: boolean } = {},
  ): KubeObject {
    const object = this.#require(type, namespace, name);
    if (options.dryRun === true) return structuredClone(object);
    this.#remove(type, object);
    this.#collect(object.metadata.uid, types);
    return structuredClone(object);
  }

  #remove(type: ResourceType, object: KubeObject): void {
    this.#objects.delete(this.#key(type, object.metadata.namespace, object.metadata.name));
    this.#revision++;
    object.metadata.resourceVersion = String(this.#revision);
    this.#emit('DELETED', object, type);
  }

  #collect(ownerUid: string, types: readonly ResourceType[]): void {
    const doomed: Array<[ResourceType, KubeObject]> = [];
    for (const type of types) {
      for (const [key, object] of this.#objects) {
        if (!key.startsWith(`${typeKey(type)}|`)) continue;
        const refs = object.metadata.ownerReferences ?? [];
        if (!refs.some((ref) => ref.uid === ownerUid)) continue;
        const remaining = refs.filter((ref) => ref.uid !== ownerUid);
        if (remaining.length === 0) {
          doomed.push([type, object]);
        } else {
          this.#revision++;
          object.metadata.ownerReferences = remaining;
          object.metadata.resourceVersion = String(this.#revision);
          this.#emit('MODIFIED', object, type);
        }
      }
    }
    for (const [type, object] of doomed) {
      if (!this.#objects.has(this.#key(type, object.metadata.namespace, object.metadata.name)))
        continue;
      this.#remove(type, object);
      this.#collect(object.metadata.uid, types);
    }
  }

  /**
   * Streams events after revision `from` (replayed from history, then live) to `send`.
   * Returns the function that stops it. A revision older than the history throws 410 Gone.
   */
  watch(from: number, send: (event: WatchEvent) => void): () => void {
    if (from < this.oldestResumable) {
      throw new ApiError(
        410,
        'Gone',
        `too old resource version: ${from} (${this.oldestResumable})`,
      );
    }
    for (const event of this.#history) if (event.rv > from) send(event);
    this.#listeners.add(send);
    return () => this.#listeners.delete(send);
  }

  /** Everything, for a snapshot file. */
  dump(): { revision: number; objects: KubeObject[] } {
    return {
      revision: this.#revision,
      objects: [...this.#objects.values()].map((o) => structuredClone(o)),
    };
  }

  /** Restores a snapshot made by `dump` (history starts empty). */
  load(
    snapshot: { revision: number; objects: KubeObject[] },
    types: readonly ResourceType[],
  ): void {
    for (const object of snapshot.objects) {
      const type = types.find(
        (t) => apiVersionOf(t) === object.apiVersion && t.kind === object.kind,
      );
      if (type === undefined) continue;
      this.#objects.set(this.#key(type, object.metadata.namespace, object.metadata.name), object);
    }
    this.#revision = snapshot.revision;
  }
}

export { Store, ApiError, apiVersionOf };
export type { Admit, WriteOptions };
export type { ResourceType, KubeObject, ObjectMeta, OwnerReference, WatchEvent };
