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

/**
 * The control plane's Services as the manifests give them, with the one change a user makes on
 * a cluster (docs/deploying.md, step 5): where edge workers report, here the cluster-internal
 * name, which the supervisor routes to the local upstream-status.
 */
function controlPlane(root: URL): KubeObject[] {
  const services = documents(yamlFiles(new URL('knative/services/', root)), 'Service');
  for (const service of services) {
    const containers = (
      service['spec'] as {
        template: { spec: { containers: Array<{ env?: Array<Record<string, unknown>> }> } };
      }
    ).template.spec.containers;
    for (const container of containers) {
      for (const variable of container.env ?? []) {
        if (variable['name'] === 'UPSTREAM_STATUS_URL') {
          variable['value'] = `http://upstream-status.${namespace}.svc.cluster.local`;
        }
      }
    }
  }
  return services;
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

/**
 * The local "cluster": Nodes edge0 and solar-corona-cloud with their report tokens (the edge
 * worker signs its reports with its node's token; upstream-status checks it) and, in each of
 * `namespaces`, reconcile-tick's WORKER_SECRET and GRAPH_SECRET (what every worker and graph
 * Service gets as environment).
 */
async function prepareCluster(
  kube: Kube,
  redisUrl: string,
  namespaces: readonly string[],
): Promise<void> {
  for (const node of ['edge0', 'solar-corona-cloud']) {
    await apply(kube, 'node', undefined, {
      metadata: { name: node, labels: { 'kubernetes.io/hostname': node } },
    });
    // What a kubelet would report: the node is Ready (kubectl get nodes shows it so).
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
    const token = randomBytes(24).toString('base64url');
    for (const ns of new Set([...namespaces, namespace])) {
      await apply(kube, 'secret', ns, {
        metadata: { name: `edgeai-node-${node}`, namespace: ns },
        stringData: { token },
      });
    }
  }
  // reconcile-tick's WORKER_SECRET and GRAPH_SECRET; locally one Redis user for all.
  for (const ns of namespaces) {
    for (const name of ['edgeai-worker', 'edgeai-mlgraph']) {
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
): Promise<void> {
  const say = options.say ?? (() => {});
  const services = controlPlane(options.root);
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

    // The local Redis has no password: the Secret the manifests read holds an empty one.
    await apply(api.kube, 'secret', namespace, {
      metadata: { name: 'edgeai-redis-auth', namespace },
      stringData: { password: '' },
    });

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
    await applyControlPlane(options, api.kube, serving);
    await prepareCluster(api.kube, redis.url, options.workerNamespaces ?? ['default']);
    return {
      kube: api.kube,
      apiUrl: api.url,
      kubeconfigFile: api.kubeconfigFile,
      store: api.store,
      brokerUrl,
      redisUrl: redis.url,
      redisPid: redis.pid,
      serving,
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
