/**
 * The embedded local stack: everything the control plane runs on, in one process, with no
 * cluster — Redis (REDIS_URL, else a private redis-server), the development API server, the
 * development Serving supervisor running each Knative Service as a local process of the image's
 * bundle, the development Broker with the repository's Triggers and PingSources, and its
 * ApiServerSources — then the control plane itself, applied from knative/services/ as a user
 * applies it to a cluster. Built for `make demo` and for trying changes end to end.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { ConflictError } from '../shared/errors/index.js';
import { createKube, createKubeWatch, loadKubeConfig } from '../shared/k8s/index.js';
import type { Kube, KindName, KubeObject } from '../shared/k8s/index.js';
import { createDevApiServer, kubeconfig, listenDevApiServer } from './apiserver/index.js';
import type { Store } from './apiserver/index.js';
import { parseApiServerSources, startApiServerSources } from './apiserver-source.js';
import { createDevBroker, formatRecord, loadEventing, startPingSources } from './broker/index.js';
import type { BrokerRecord } from './broker/index.js';
import { checkRedisReachable, startRedisServer } from './redis-server.js';
import { createServingSupervisor } from './serving/index.js';
import type { LogSource, ServingSupervisor } from './serving/index.js';

interface LocalStack {
  readonly kube: Kube;
  readonly apiUrl: string;
  readonly kubeconfigFile: string;
  /** The API server's state (to snapshot). */
  readonly store: Store;
  /** The Broker the control plane's events go through (edgeai-system/default). */
  readonly brokerUrl: string;
  readonly redisUrl: string;
  /** The private redis-server's process, when the stack started one. */
  readonly redisPid: number | undefined;
  readonly serving: ServingSupervisor;
  /** Where the kubeconfig is (and, with keepState, Redis's data): the caller's or a temporary one. */
  readonly stateDir: string;
  /** The stable URL of a Knative Service (its route), once a revision is ready. */
  urlOf(namespace: string, name: string): string | undefined;
  close(): Promise<void>;
}

interface LocalStackOptions {
  /** The repository (knative/, models/, data/ and the bundle are read from it). */
  root: URL;
  /** The image's entry point, built by `npm run bundle`. */
  bundle: string;
  /** An existing Redis (checked at start); else the stack runs a private redis-server. */
  redisUrl?: string;
  /** Ports for the API server and the Broker (0 or none: any free port). */
  apiPort?: number;
  brokerPort?: number;
  /** The API server's state to start from (a snapshot); a fresh one by default. */
  store?: Store;
  /**
   * Where the kubeconfig is written (a temporary directory, removed at close, by default). With
   * keepState, the private redis-server keeps its data under `<stateDir>/redis` across restarts.
   */
  stateDir?: string;
  keepState?: boolean;
  /** Namespaces whose JointInferenceServices the workers' Secret is made for (default). */
  workerNamespaces?: readonly string[];
  /** Fire every PingSource this often instead of on its minute schedule. */
  tickEveryMs?: number;
  /** Environment for every process (over the manifests'), e.g. REPORT_INTERVAL_MS. */
  env?: Readonly<Record<string, string>>;
  onLog?: (source: LogSource, line: string) => void;
  onBrokerEvent?: (record: BrokerRecord, line: string) => void;
  onError?: (err: unknown) => void;
  /** Steps as they happen, for the person watching. */
  say?: (line: string) => void;
  /** Stops waiting (the stack is still closed by its caller). */
  signal?: AbortSignal;
}

const namespace = 'edgeai-system';

function yamlFiles(dir: URL): string[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .sort()
    .map((f) => readFileSync(new URL(f, dir), 'utf8'));
}

function documents(texts: readonly string[], kind: string): KubeObject[] {
  return texts.flatMap((text) =>
    parseAllDocuments(text)
      .map((doc) => doc.toJS() as KubeObject & { kind?: string })
      .filter((o) => o.kind === kind),
  );
}

/**
 * Polls `check` until it returns a value; fails naming `what` (and `why()`, the state that
 * explains it) after `timeoutMs`, or at once when `signal` aborts.
 */
async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined> | T | undefined,
  options: { timeoutMs?: number; why?: () => Promise<string>; signal?: AbortSignal } = {},
): Promise<T> {
  const timeoutMs = options.timeoutMs ?? 60_000;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (options.signal?.aborted === true) throw new Error(`interrupted waiting for ${what}`);
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) {
      const why = options.why === undefined ? '' : await options.why().catch(() => '');
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}${why === '' ? '' : `: ${why}`} (npm run demo -- --verbose prints every process's lines)`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** A Service's or resource's Ready condition as a sentence, for errors. */
function readiness(object: KubeObject | undefined): string {
  const conditions = (
    object?.['status'] as
      | {
          conditions?: Array<{ type?: string; status?: string; reason?: string; message?: string }>;
        }
      | undefined
  )?.conditions;
  const ready = conditions?.find((c) => c.type === 'Ready');
  if (ready === undefined) return 'no Ready condition yet';
  return `Ready=${ready.status ?? ''} ${ready.reason ?? ''}: ${ready.message ?? ''}`;
}

/** Ready=True on a Knative Service or a JointInferenceService. */
function ready(object: KubeObject | undefined): boolean {
  const conditions = (object?.['status'] as { conditions?: Array<Record<string, unknown>> })
    ?.conditions;
  return conditions?.some((c) => c['type'] === 'Ready' && c['status'] === 'True') ?? false;
}

type EnvEntry = Record<string, unknown> & { name?: string; value?: string };

function containersOf(service: KubeObject): Array<{ env?: EnvEntry[] }> {
  return (service['spec'] as { template: { spec: { containers: Array<{ env?: EnvEntry[] }> } } })
    .template.spec.containers;
}

/** The env entry named `name` of any of the Service's containers. */
function envEntry(service: KubeObject, name: string): EnvEntry | undefined {
  return containersOf(service)
    .flatMap((c) => c.env ?? [])
    .find((v) => v.name === name);
}

/**
 * The local Broker's ingress for a cluster Broker URL (`http://broker-ingress.<...>/<ns>/<name>`):
 * the same Broker on the development one, edgeai-system/default unless the URL names another.
 */
function localBrokerUrl(value: string | undefined, brokerUrl: string): string {
  const named = /^https?:\/\/[^/]+\/([a-z0-9-]+)\/([a-z0-9-]+)\/?$/.exec(value ?? '');
  return named === null ? brokerUrl : new URL(`../${named[1]}/${named[2]}`, brokerUrl).href;
}

/**
 * The control plane's Services as the manifests give them, with the changes a user makes on a
 * cluster (docs/deploying.md, step 5): where edge workers report and where the Broker is, here
 * the cluster-internal upstream-status (which the supervisor routes to the local one) and the
 * local Broker (BROKER_URL: federated aggregators announce their rounds there). Locally Redis has
 * one user (the default, no password): REDIS_USERNAME goes. Changes `services` in place.
 */
function controlPlane(services: readonly KubeObject[], brokerUrl: string): void {
  for (const service of services) {
    // One Redis user, the default one: the manifests' ACL users (REDIS_USERNAME) are the
    // cluster's Redis's (knative/redis/statefulset.yaml).
    for (const container of containersOf(service))
      if (container.env !== undefined)
        container.env = container.env.filter((v) => v.name !== 'REDIS_USERNAME');
    for (const variable of containersOf(service).flatMap((c) => c.env ?? [])) {
      if (variable.name === 'UPSTREAM_STATUS_URL') {
        variable.value = `http://upstream-status.${namespace}.svc.cluster.local`;
      } else if (variable.name === 'BROKER_URL') {
        variable.value = localBrokerUrl(variable.value, brokerUrl);
      }
    }
  }
}

/**
 * The Secrets the control plane's Redis passwords come from (REDIS_*PASSWORD secretKeyRefs), by
 * name, with the keys they read: the local Redis has no password, so each holds an empty one.
 */
function redisPasswordSecrets(services: readonly KubeObject[]): Map<string, Set<string>> {
  const secrets = new Map<string, Set<string>>([['edgeai-redis-auth', new Set(['password'])]]);
  for (const variable of services.flatMap((s) => containersOf(s).flatMap((c) => c.env ?? []))) {
    const ref = (variable['valueFrom'] as { secretKeyRef?: { name: string; key: string } })
      ?.secretKeyRef;
    if (ref === undefined || !/^REDIS_\w*PASSWORD$/.test(variable.name ?? '')) continue;
    const keys = secrets.get(ref.name) ?? new Set<string>();
    secrets.set(ref.name, keys.add(ref.key));
  }
  return secrets;
}

/**
 * The Secrets reconcile-tick gives workers as environment (WORKER_SECRET, GRAPH_SECRET,
 * FL_SECRET; edgeai-worker, edgeai-mlgraph and edgeai-fl when the manifest names none):
 * locally each holds REDIS_URL, one Redis user for all.
 */
function workerSecrets(services: readonly KubeObject[]): string[] {
  const tick = services.find((s) => envEntry(s, 'FUNCTION_TARGET')?.value === 'reconcile-tick');
  const named = ['WORKER_SECRET', 'GRAPH_SECRET', 'FL_SECRET'].map((name) =>
    tick === undefined ? undefined : envEntry(tick, name)?.value,
  );
  return [...new Set(['edgeai-worker', 'edgeai-mlgraph', 'edgeai-fl', ...named])].filter(
    (name): name is string => name !== undefined && name !== '',
  );
}

/** Creates `body`, or merges it into the object of that name when one exists (a snapshot's). */
async function apply(
  kube: Kube,
  kind: KindName,
  ns: string | undefined,
  body: KubeObject,
): Promise<KubeObject> {
  try {
    return await kube.create(kind, ns, body);
  } catch (err) {
    if (!(err instanceof ConflictError)) throw err;
    const { metadata, apiVersion: _a, kind: _k, status: _s, ...rest } = body;
    const ref = { kind, name: metadata.name ?? '', ...(ns === undefined ? {} : { namespace: ns }) };
    return kube.patch(ref, {
      metadata: { labels: metadata.labels ?? null, annotations: metadata.annotations ?? null },
      ...rest,
    });
  }
}

/** A port taken (or refused) as a sentence a person can act on. */
function portError(what: string, port: number, err: unknown): Error {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'EADDRINUSE')
    return new Error(
      `${what} cannot listen on 127.0.0.1:${port}: the port is in use (pick another, or 0 for any free port)`,
    );
  return new Error(
    `${what} cannot listen on 127.0.0.1:${port}: ${err instanceof Error ? err.message : String(err)}`,
  );
}

/** The documents of a YAML file, or an error naming the file and the line that does not parse. */
function parseManifests(text: string, shown: string): KubeObject[] {
  return parseAllDocuments(text).map((doc) => {
    const error = doc.errors[0];
    if (error !== undefined) {
      const at = error.linePos?.[0];
      throw new Error(
        `${shown}${at === undefined ? '' : `:${at.line}:${at.col}`} does not parse: ${error.message.split('\n')[0]}`,
      );
    }
    return doc.toJS() as KubeObject;
  });
}

/** The one document of a manifest file (`shown` names it in errors). */
function readManifest(file: URL, shown: string): KubeObject {
  const [first, ...rest] = parseManifests(readFileSync(file, 'utf8'), shown);
  if (first === undefined || rest.length > 0) throw new Error(`${shown}: expected one document`);
  return first;
}

/** Every manifest the stack applies parses, or the error names the file and line. */
function checkManifests(root: URL): void {
  for (const dir of ['knative/services/', 'knative/eventing/']) {
    const url = new URL(dir, root);
    for (const file of readdirSync(url).filter((f) => f.endsWith('.yaml'))) {
      parseManifests(readFileSync(new URL(file, url), 'utf8'), `${dir}${file}`);
    }
  }
}

/** The local "cluster"'s Nodes: edge nodes for workers and trainers, and the cloud one. */
const nodes = ['edge0', 'edge1', 'edge2', 'solar-corona-cloud'] as const;

/** A Node as a kubelet registers it, Ready (kubectl get nodes shows it so). */
async function registerNode(kube: Kube, node: string): Promise<void> {
  await apply(kube, 'node', undefined, {
    metadata: { name: node, labels: { 'kubernetes.io/hostname': node } },
  });
  const now = new Date().toISOString();
  await kube.patchStatus(
    { kind: 'node', name: node },
    {
      status: {
        conditions: [
          {
            type: 'Ready',
            status: 'True',
            reason: 'EdgeaiLocal',
            message: 'a node of the embedded local stack',
            lastHeartbeatTime: now,
            lastTransitionTime: now,
          },
        ],
        nodeInfo: { kubeletVersion: 'edgeai-local' },
      },
    },
  );
}

/**
 * The local "cluster": the Nodes with their tokens (an edge worker signs its reports with its
 * node's token, which upstream-status checks; a federated trainer its updates, which the
 * aggregator checks) and, in each of `namespaces`, the Secrets reconcile-tick gives workers as
 * environment (`secrets`: WORKER_SECRET, GRAPH_SECRET, FL_SECRET).
 */
async function prepareCluster(
  kube: Kube,
  redisUrl: string,
  namespaces: readonly string[],
  secrets: readonly string[],
): Promise<void> {
  for (const node of nodes) {
    await registerNode(kube, node);
    const token = randomBytes(24).toString('base64url');
    for (const ns of new Set([...namespaces, namespace])) {
      await apply(kube, 'secret', ns, {
        metadata: { name: `edgeai-node-${node}`, namespace: ns },
        stringData: { token },
      });
    }
  }
  // Locally one Redis user for all.
  for (const ns of namespaces) {
    for (const name of secrets) {
      await apply(kube, 'secret', ns, {
        metadata: { name, namespace: ns },
        stringData: { REDIS_URL: redisUrl },
      });
    }
  }
}

/** Each piece's close, run once in the reverse order of starting (consumers before sources). */
function closerList(onError: ((err: unknown) => void) | undefined) {
  const closers: Array<() => Promise<void> | void> = [];
  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      for (const closer of [...closers].reverse()) {
        try {
          await closer();
        } catch (err) {
          onError?.(err);
        }
      }
    })());
  return { push: (closer: () => Promise<void> | void) => closers.push(closer), close };
}

type Closers = ReturnType<typeof closerList>;

/** REDIS_URL checked at once (a person waits for nothing), else a private redis-server. */
async function startRedis(options: LocalStackOptions, closers: Closers) {
  if (options.redisUrl !== undefined) {
    await checkRedisReachable(options.redisUrl);
    return { url: options.redisUrl, pid: undefined };
  }
  const redis = await startRedisServer(
    options.stateDir === undefined || !options.keepState
      ? {}
      : { dataDir: join(options.stateDir, 'redis') },
  );
  closers.push(() => redis.stop());
  return { url: redis.url, pid: redis.pid };
}

/** The development API server, its kubeconfig (in the state directory) and a client of it. */
async function startApi(options: LocalStackOptions, stateDir: string, closers: Closers) {
  const token = randomUUID();
  const api = createDevApiServer({
    token,
    ...(options.store === undefined ? {} : { store: options.store }),
  });
  const listening = await listenDevApiServer(api, options.apiPort ?? 0).catch((err: unknown) => {
    throw portError('the development API server', options.apiPort ?? 0, err);
  });
  closers.push(() => listening.close());
  const kubeconfigFile = join(stateDir, 'kubeconfig');
  writeFileSync(kubeconfigFile, kubeconfig({ server: listening.url, token, ca: api.ca }), {
    mode: 0o600,
  });
  const kubeConfig = loadKubeConfig({ KUBECONFIG: kubeconfigFile });
  return {
    url: listening.url,
    kubeconfigFile,
    kubeConfig,
    kube: createKube(kubeConfig),
    store: api.store,
  };
}

/** The development Broker with the repository's Triggers, PingSources and ApiServerSources. */
async function startEventing(
  options: LocalStackOptions,
  api: Awaited<ReturnType<typeof startApi>>,
  serving: ServingSupervisor,
  closers: Closers,
) {
  const eventing = yamlFiles(new URL('knative/eventing/', options.root));
  const manifests = loadEventing(eventing);
  const broker = createDevBroker({
    manifests,
    resolve: (ref) =>
      ref.kind === 'Service' && ref.apiVersion.startsWith('serving.knative.dev/')
        ? serving.urlOf(ref.namespace, ref.name)
        : undefined,
    maxBackoffMs: 2_000,
    ...(options.onBrokerEvent === undefined
      ? {}
      : {
          onEvent: (record: BrokerRecord) => options.onBrokerEvent?.(record, formatRecord(record)),
        }),
  });
  const brokerUrl = await broker.listen(options.brokerPort ?? 0).catch((err: unknown) => {
    throw portError('the Broker', options.brokerPort ?? 0, err);
  });
  closers.push(() => broker.close());
  const pings = startPingSources({
    sources: manifests.pingSources,
    broker,
    ...(options.tickEveryMs === undefined ? {} : { everyMs: options.tickEveryMs }),
  });
  closers.push(() => pings.stop());
  const sources = await startApiServerSources({
    sources: parseApiServerSources(eventing),
    kube: api.kube,
    watch: createKubeWatch(api.kubeConfig),
    serverUrl: api.url,
    brokerUrl: (ns, name) => `${brokerUrl}/${ns}/${name}`,
    ...(options.onError === undefined ? {} : { onError: options.onError }),
  });
  closers.push(() => sources.stop());
  return `${brokerUrl}/${namespace}/default`;
}

/** The control plane's Services, applied (created, or updated when a snapshot has them). */
async function applyControlPlane(
  options: LocalStackOptions,
  kube: Kube,
  serving: ServingSupervisor,
  services: readonly KubeObject[],
): Promise<void> {
  const say = options.say ?? (() => {});
  for (const service of services) await apply(kube, 'knativeService', namespace, service);
  for (const service of services) {
    const ref = { kind: 'knativeService' as const, namespace, name: service.metadata.name ?? '' };
    await waitFor(
      `Knative Service ${namespace}/${ref.name} to be ready`,
      async () => (ready(await kube.get(ref)) ? true : undefined),
      {
        why: async () => readiness(await kube.get(ref)),
        ...(options.signal === undefined ? {} : { signal: options.signal }),
      },
    );
    say(`function       ${ref.name.padEnd(16)} ${serving.urlOf(namespace, ref.name) ?? ''}`);
  }
}

async function startLocalStack(options: LocalStackOptions): Promise<LocalStack> {
  const say = options.say ?? (() => {});
  const closers = closerList(options.onError);
  try {
    checkManifests(options.root);
    const redis = await startRedis(options, closers);
    say(`redis          ${redis.url}`);

    let stateDir = options.stateDir;
    if (stateDir === undefined) {
      const dir = mkdtempSync(join(tmpdir(), 'edgeai-local-'));
      closers.push(() => rmSync(dir, { recursive: true, force: true }));
      stateDir = dir;
    }
    const api = await startApi(options, stateDir, closers);
    say(`api server     ${api.url} (KUBECONFIG=${api.kubeconfigFile})`);

    // The local Redis has no password: the Secrets the manifests read it from hold empty ones.
    const services = documents(yamlFiles(new URL('knative/services/', options.root)), 'Service');
    for (const [name, keys] of redisPasswordSecrets(services)) {
      await apply(api.kube, 'secret', namespace, {
        metadata: { name, namespace },
        stringData: Object.fromEntries([...keys].map((key) => [key, ''])),
      });
    }

    const root = fileURLToPath(options.root);
    const serving = createServingSupervisor({
      kubeConfig: api.kubeConfig,
      kube: api.kube,
      bundle: options.bundle,
      cwd: root,
      env: {
        KUBECONFIG: api.kubeconfigFile,
        MODEL_ROOT: join(root, 'models'),
        LOG_LEVEL: 'warn',
        ...options.env,
      },
      configMaps: { 'edgeai-redis': { url: redis.url } },
      ...(options.onLog === undefined ? {} : { onLog: options.onLog }),
      ...(options.onError === undefined ? {} : { onError: options.onError }),
      restartBackoff: { initialMs: 500, maxMs: 5_000 },
      terminationGraceMs: 3_000,
    });
    await serving.start();
    closers.push(() => serving.close());

    const brokerUrl = await startEventing(options, api, serving, closers);
    say(`broker         ${brokerUrl}`);
    controlPlane(services, brokerUrl);
    await applyControlPlane(options, api.kube, serving, services);
    await prepareCluster(
      api.kube,
      redis.url,
      options.workerNamespaces ?? ['default'],
      workerSecrets(services),
    );
    return {
      kube: api.kube,
      apiUrl: api.url,
      kubeconfigFile: api.kubeconfigFile,
      store: api.store,
      brokerUrl,
      redisUrl: redis.url,
      redisPid: redis.pid,
      serving,
      stateDir,
      urlOf: (ns, name) => serving.urlOf(ns, name),
      close: closers.close,
    };
  } catch (err) {
    await closers.close();
    throw err;
  }
}

export { apply, readManifest, startLocalStack, waitFor, ready, readiness };
export type { LocalStack, LocalStackOptions };
