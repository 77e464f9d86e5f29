/**
 * The development API server: the Kubernetes REST subset the control plane uses, over HTTP, so
 * that tests and the local stack run the production @kubernetes/client-node code path.
 * Served (see docs/dev-apiserver.md): get, list (labelSelector), watch (resourceVersion resume,
 * 410 Gone), create, replace (PUT), JSON merge patch, delete with background garbage collection,
 * the /status subresource, discovery for kubectl. Every request needs the bearer token.
 */
import { timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { Server as HttpsServer } from 'node:https';
import { matches, parseSelector } from './selector.js';
import { ApiError, Store, apiVersionOf } from './store.js';
import type { KubeObject, WatchEvent } from './store.js';
import { admission, fieldValidationOf } from './admission.js';
import { matchesFields, parseFieldSelector } from './field-selector.js';
import type { FieldRequirement } from './field-selector.js';
import { openApiDocument } from './openapi.js';
import { OpenApiV2Protobuf, openApiV2Protobuf } from './openapi-v2-proto.js';
import { patchTypeOf } from './patch.js';
import type { Requirement } from './selector.js';
import {
  columnsFor,
  includeObjectOf,
  negotiateOutput,
  tableOf,
  watchTableEncoder,
} from './table.js';
import type { Output, TableOptions } from './table.js';
import { servingCertificates } from './tls.js';
import { servedTypes } from './types.js';
import type { ServedType } from './types.js';

const bodyLimit = 3 * 1024 * 1024;

interface Target {
  type: ServedType;
  namespace: string | undefined;
  name: string | undefined;
  subresource: 'status' | undefined;
}

function status(
  code: number,
  reason: string,
  message: string,
  details?: Readonly<Record<string, unknown>>,
) {
  return {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason,
    ...(details === undefined ? {} : { details }),
    code,
  };
}

function send(res: ServerResponse, code: number, body: unknown, warnings: string[] = []): void {
  const text = JSON.stringify(body);
  if (warnings.length > 0) res.setHeader('warning', warnings);
  res.writeHead(code, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

/** What a list or watch selects: labels and fields, both as kube parses them. */
interface Selection {
  labels: readonly Requirement[];
  fields: readonly FieldRequirement[];
}

function selectionOf(url: URL, type: ServedType): Selection {
  return {
    labels: parseSelector(url.searchParams.get('labelSelector') ?? ''),
    fields: parseFieldSelector(url.searchParams.get('fieldSelector') ?? '', type),
  };
}

const selects = (selection: Selection, type: ServedType, object: KubeObject) =>
  matches(selection.labels, object.metadata.labels ?? {}) &&
  matchesFields(selection.fields, type, object);

/** A DELETE's optional DeleteOptions body. */
async function readDeleteOptions(req: IncomingMessage): Promise<{ dryRun?: string[] }> {
  const length = req.headers['content-length'];
  if (length === '0' || (length === undefined && req.headers['transfer-encoding'] === undefined))
    return {};
  const body = await readJson(req);
  if (typeof body !== 'object' || body === null) return {};
  const dryRun = (body as { dryRun?: unknown }).dryRun;
  if (dryRun !== undefined && !(Array.isArray(dryRun) && dryRun.every((v) => v === 'All')))
    throw new ApiError(400, 'BadRequest', `unsupported dry run option: ${JSON.stringify(dryRun)}`);
  return dryRun === undefined ? {} : { dryRun: dryRun as string[] };
}

/** dryRun=All (kubectl --dry-run=server): checked and answered, never stored. */
function dryRunOf(url: URL): boolean {
  const values = url.searchParams.getAll('dryRun');
  for (const value of values) {
    if (value !== 'All')
      throw new ApiError(400, 'BadRequest', `unsupported dry run option: ${value}`);
  }
  return values.length > 0;
}

/** A Table (kubectl get) or the objects themselves, as the Accept header asks. */
function readOutput(req: IncomingMessage, url: URL): Output & { options?: TableOptions } {
  const output = negotiateOutput(req.headers.accept);
  if (output.as === 'NotAcceptable') throw new ApiError(406, 'NotAcceptable', output.message);
  if (output.as === 'Object') return output;
  return {
    ...output,
    options: { version: output.version, includeObject: includeObjectOf(url.searchParams) },
  };
}

/** The OpenAPI documents; /openapi/v2 also as gnostic protobuf, the only form kubectl < 1.27 reads. */
function openApi(req: IncomingMessage, pathname: string): unknown {
  const document = openApiDocument(pathname, servedTypes);
  if (pathname !== '/openapi/v2') return document;
  return openApiV2Protobuf(req.headers.accept, document) ?? document;
}

function readJson(req: IncomingMessage): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > bodyLimit) {
        reject(new ApiError(413, 'BadRequest', `request body exceeds ${bodyLimit} bytes`));
        req.destroy();
      } else {
        chunks.push(chunk);
      }
    });
    req.on('end', () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown);
      } catch {
        reject(new ApiError(400, 'BadRequest', 'the request body is not valid JSON'));
      }
    });
    req.on('error', reject);
  });
}

/** The group and version a resource path names (the core group is /api/v1), and what follows. */
function groupVersionOf(
  parts: readonly string[],
): { group: string; version: string; rest: string[] } | undefined {
  if (parts[0] === 'api' && parts[1] === 'v1')
    return { group: '', version: 'v1', rest: parts.slice(2) };
  if (parts[0] === 'apis' && parts.length >= 4)
    return { group: parts[1]!, version: parts[2]!, rest: parts.slice(3) };
  return undefined;
}

/** Whether the type serves the path's shape: its status only if it has one, scoped as it is. */
function servesPath(
  type: ServedType,
  namespace: string | undefined,
  name: string | undefined,
  subresource: string | undefined,
): boolean {
  if (subresource !== undefined && (subresource !== 'status' || !type.status)) return false;
  if (type.namespaced === false && namespace !== undefined) return false;
  if (type.namespaced && name !== undefined && namespace === undefined) return false;
  return true;
}

/** Maps a path to a served type, or undefined for paths outside the resource API. */
function resolve(parts: readonly string[]): Target | undefined {
  const groupVersion = groupVersionOf(parts);
  if (groupVersion === undefined) return undefined;
  const { group, version } = groupVersion;
  let { rest } = groupVersion;
  let namespace: string | undefined;
  if (rest[0] === 'namespaces' && rest.length >= 3) {
    namespace = rest[1];
    rest = rest.slice(2);
  }
  const [plural, name, subresource, ...extra] = rest;
  const type = servedTypes.find(
    (t) => t.group === group && t.version === version && t.plural === plural,
  );
  if (type === undefined || extra.length > 0) return undefined;
  if (!servesPath(type, namespace, name, subresource)) return undefined;
  return { type, namespace, name, subresource: subresource === 'status' ? 'status' : undefined };
}

function listOf(type: ServedType, items: KubeObject[], revision: number) {
  return {
    apiVersion: apiVersionOf(type),
    kind: `${type.kind}List`,
    metadata: { resourceVersion: String(revision) },
    items,
  };
}

function discovery(parts: readonly string[]): unknown {
  const path = parts.join('/');
  const resources = (group: string, version: string) => ({
    kind: 'APIResourceList',
    apiVersion: 'v1',
    groupVersion: group === '' ? version : `${group}/${version}`,
    resources: servedTypes
      .filter((t) => t.group === group && t.version === version)
      .flatMap((t) => [
        {
          name: t.plural,
          singularName: t.singular,
          namespaced: t.namespaced,
          kind: t.kind,
          verbs: ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'],
          ...(t.shortNames.length > 0 ? { shortNames: t.shortNames } : {}),
        },
        ...(t.status
          ? [
              {
                name: `${t.plural}/status`,
                namespaced: t.namespaced,
                kind: t.kind,
                verbs: ['get', 'patch', 'update'],
              },
            ]
          : []),
      ]),
  });
  if (path === 'version')
    return { major: '1', minor: '31', gitVersion: 'v1.31.0-edgeai-dev', platform: 'linux/amd64' };
  if (path === 'api')
    return { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [] };
  if (path === 'api/v1') return resources('', 'v1');
  const groups = [
    ...new Set(servedTypes.filter((t) => t.group !== '').map((t) => `${t.group}/${t.version}`)),
  ];
  if (path === 'apis') {
    return {
      kind: 'APIGroupList',
      apiVersion: 'v1',
      groups: groups.map((gv) => {
        const [name, version] = gv.split('/') as [string, string];
        const preferred = { groupVersion: gv, version };
        return { name, versions: [preferred], preferredVersion: preferred };
      }),
    };
  }
  if (parts[0] === 'apis' && parts.length === 3 && groups.includes(`${parts[1]}/${parts[2]}`)) {
    return resources(parts[1]!, parts[2]!);
  }
  return undefined;
}

function watch(
  store: Store,
  req: IncomingMessage,
  res: ServerResponse,
  target: Target,
  url: URL,
): void {
  const { type } = target;
  const selection = selectionOf(url, type);
  const output = readOutput(req, url);
  const from = url.searchParams.get('resourceVersion');
  const timeout = Number(url.searchParams.get('timeoutSeconds') ?? 0);
  const start = from === null || from === '' || from === '0' ? undefined : Number(from);
  const wanted = (event: WatchEvent) =>
    event.resource === type &&
    (target.namespace === undefined || event.object.metadata.namespace === target.namespace) &&
    (target.name === undefined || event.object.metadata.name === target.name);
  // kubectl get -w asks for Tables: each event's object is a one-row Table.
  const encode =
    output.options === undefined
      ? (object: KubeObject): unknown => object
      : watchTableEncoder(columnsFor(type), output.options);
  const write = (eventType: string, object: KubeObject) =>
    res.write(`${JSON.stringify({ type: eventType, object: encode(object) })}\n`);
  res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
  res.flushHeaders(); // a watch may stay silent for long: the client waits for headers first
  let stop: () => void = () => {};
  try {
    if (start === undefined) {
      // No resourceVersion: the current state as synthetic ADDED events, then live changes.
      for (const object of store.list(type, target.namespace, selection.labels)) {
        if (target.name === undefined || object.metadata.name === target.name)
          if (matchesFields(selection.fields, type, object)) write('ADDED', object);
      }
    }
    stop = store.watch(start ?? store.revision, (event) => {
      if (!wanted(event)) return;
      const now = selects(selection, type, event.object);
      const previous = event.previous;
      const before = previous === undefined ? now : selects(selection, type, previous);
      // As Kubernetes does: a change that moves an object out of (into) the selection is a
      // DELETED (ADDED) for this watch; the DELETED carries the state the watch last matched,
      // at the change's resourceVersion.
      if (before && now) write(event.type, event.object);
      else if (before && previous !== undefined) {
        const { resourceVersion } = event.object.metadata;
        write('DELETED', { ...previous, metadata: { ...previous.metadata, resourceVersion } });
      } else if (now) write('ADDED', event.object);
    });
  } catch (err) {
    if (err instanceof ApiError) {
      res.write(
        `${JSON.stringify({ type: 'ERROR', object: status(err.code, err.reason, err.message) })}\n`,
      );
    }
    res.end();
    return;
  }
  const close = () => {
    stop();
    if (!res.writableEnded) res.end();
  };
  req.on('close', close);
  if (timeout > 0) setTimeout(close, timeout * 1000).unref();
}

/** GET of a collection or one object: the objects, or a Table for kubectl. */
function read(
  store: Store,
  req: IncomingMessage,
  res: ServerResponse,
  target: Target,
  url: URL,
): void {
  const { type, namespace, name } = target;
  const output = readOutput(req, url);
  let items: KubeObject[];
  let revision: number;
  if (name === undefined) {
    const selection = selectionOf(url, type);
    items = store
      .list(type, namespace, selection.labels)
      .filter((o) => matchesFields(selection.fields, type, o));
    revision = store.revision;
  } else {
    const object = store.get(type, namespace, name);
    if (output.options === undefined) return send(res, 200, object);
    items = [object];
    revision = Number(object.metadata.resourceVersion);
  }
  if (output.options !== undefined) {
    const list = { resourceVersion: String(revision) };
    return send(res, 200, tableOf(columnsFor(type), items, list, output.options));
  }
  send(res, 200, listOf(type, items, revision));
}

/** POST, PUT and PATCH: admitted against the kind's schema, warnings in Warning headers. */
async function write(
  store: Store,
  req: IncomingMessage,
  res: ServerResponse,
  target: Target,
  url: URL,
): Promise<void> {
  const { type, namespace, name, subresource } = target;
  const warnings: string[] = [];
  const admit = admission(type, fieldValidationOf(url.searchParams), warnings);
  const options = { ...(admit === undefined ? {} : { admit }), dryRun: dryRunOf(url) };
  const method = req.method ?? '';
  if (method === 'POST' && name === undefined) {
    const created = store.create(type, namespace, await readJson(req), options);
    return send(res, 201, created, warnings);
  }
  if (method === 'PUT' && name !== undefined) {
    const body = await readJson(req);
    const replaced = store.replace(type, namespace, name, body, subresource, options);
    return send(res, 200, replaced, warnings);
  }
  if (method === 'PATCH' && name !== undefined) {
    const contentType = req.headers['content-type'] ?? '';
    const patchType = patchTypeOf(contentType);
    // Custom resources have no patch strategies: kube refuses strategic merge patch for them.
    if (patchType === undefined || (patchType === 'strategic' && type.schema !== undefined)) {
      throw new ApiError(
        415,
        'UnsupportedMediaType',
        `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json${type.schema === undefined ? ', application/strategic-merge-patch+json' : ''}`,
      );
    }
    const patch = { type: patchType, body: await readJson(req) };
    return send(
      res,
      200,
      store.patch(type, namespace, name, patch, subresource, options),
      warnings,
    );
  }
  throw new ApiError(405, 'MethodNotAllowed', `${method} is not supported on ${url.pathname}`);
}

/** GET outside the resource API: discovery and the OpenAPI documents; anything else is 404. */
function serveNonResource(
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
  parts: readonly string[],
  method: string,
): void {
  const found =
    method !== 'GET'
      ? undefined
      : parts[0] === 'openapi'
        ? openApi(req, url.pathname)
        : discovery(parts);
  if (found instanceof OpenApiV2Protobuf) return found.write(res);
  if (found !== undefined) return send(res, 200, found);
  throw new ApiError(
    404,
    'NotFound',
    `the server could not find the requested resource (${url.pathname})`,
  );
}

/** DELETE of one object: removed (its dependents collected), answered with a Success Status. */
async function remove(
  store: Store,
  req: IncomingMessage,
  res: ServerResponse,
  target: Target,
  name: string,
  url: URL,
): Promise<void> {
  // kubectl sends DeleteOptions as the body (dryRun among them), other clients the query.
  const body = await readDeleteOptions(req);
  const dryRun = dryRunOf(url) || (body.dryRun ?? []).includes('All');
  const deleted = store.delete(target.type, target.namespace, name, servedTypes, { dryRun });
  return send(res, 200, {
    ...status(200, '', ''),
    status: 'Success',
    details: { name, kind: target.type.plural, uid: deleted.metadata.uid },
  });
}

interface DevApiServer {
  server: HttpsServer;
  store: Store;
  /** PEM: the CA that signed the serving certificate (for the kubeconfig). */
  ca: string;
}

interface DevApiServerOptions {
  /** The bearer token every request must carry. */
  token: string;
  store?: Store;
}

/** Builds the server (not listening): HTTPS with a certificate made now. */
function createDevApiServer(options: DevApiServerOptions): DevApiServer {
  const store = options.store ?? new Store();
  const expected = Buffer.from(`Bearer ${options.token}`);

  function authorized(req: IncomingMessage): boolean {
    const given = Buffer.from(req.headers.authorization ?? '');
    return given.length === expected.length && timingSafeEqual(given, expected);
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (!authorized(req)) return send(res, 401, status(401, 'Unauthorized', 'Unauthorized'));
    const url = new URL(req.url ?? '/', 'http://localhost');
    const parts = url.pathname.split('/').filter((p) => p !== '');
    const method = req.method ?? 'GET';
    const target = resolve(parts);
    if (target === undefined) return serveNonResource(req, res, url, parts, method);
    const isWatch =
      url.searchParams.get('watch') === 'true' || url.searchParams.get('watch') === '1';
    if (method === 'GET' && isWatch) return watch(store, req, res, target, url);
    if (method === 'GET') return read(store, req, res, target, url);
    if (method === 'DELETE' && target.name !== undefined && target.subresource === undefined)
      return remove(store, req, res, target, target.name, url);
    return write(store, req, res, target, url);
  }

  const onRequest = (req: IncomingMessage, res: ServerResponse) => {
    handle(req, res).catch((err: unknown) => {
      if (res.headersSent) return res.destroy();
      if (err instanceof ApiError)
        return send(res, err.code, status(err.code, err.reason, err.message, err.details));
      if (err instanceof Error && /label|selector/.test(err.message)) {
        return send(
          res,
          400,
          status(400, 'BadRequest', `unable to parse requirement: ${err.message}`),
        );
      }
      send(res, 500, status(500, 'InternalError', 'internal error'));
    });
  };
  const { ca, cert, key } = servingCertificates();
  return { server: createHttpsServer({ cert, key }, onRequest), store, ca };
}

/** Listens on `host:port` (0: any free port); the URL clients use and a close that ends watches. */
function listenDevApiServer(
  dev: DevApiServer,
  port = 0,
  host = '127.0.0.1',
): Promise<{ url: string; close(): Promise<void> }> {
  const { server } = dev;
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      const address = server.address();
      if (address === null || typeof address === 'string') return reject(new Error('no address'));
      resolve({
        url: `https://${host}:${address.port}`,
        close: () =>
          new Promise<void>((done) => {
            server.closeAllConnections();
            server.close(() => done());
          }),
      });
    });
  });
}

export { createDevApiServer, listenDevApiServer };
export type { DevApiServer, DevApiServerOptions };
