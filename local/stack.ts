/**
 * The embedded local stack: everything the control plane runs on, in one process, with no
 * cluster — Redis (REDIS_URL, else a private redis-server), the development API server, the
 * development Serving supervisor running each Knative Service as a local process of the image's
 * bundle, the development Broker with the repository's Triggers and PingSources, and its
 * ApiServerSources — then the control plane itself, applied from knative/services/ as a user
 * applies it to a cluster. Built for `make demo` and for trying changes end to end.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { createKube, createKubeWatch, loadKubeConfig } from '../shared/k8s/index.js';
import type { Kube, KubeObject } from '../shared/k8s/index.js';
import { createDevApiServer, kubeconfig } from './apiserver/index.js';
import { parseApiServerSources, startApiServerSources } from './apiserver-source.js';
import { createDevBroker, formatRecord, loadEventing, startPingSources } from './broker/index.js';
import type { BrokerRecord } from './broker/index.js';
import { startRedisServer } from './redis-server.js';
import { createServingSupervisor } from './serving/index.js';
import type { LogSource, ServingSupervisor } from './serving/index.js';

interface LocalStack {
  readonly kube: Kube;
  readonly apiUrl: string;
  readonly kubeconfigFile: string;
  readonly redisUrl: string;
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
  redisUrl?: string;
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

async function startLocalStack(options: LocalStackOptions): Promise<LocalStack> {
  const say = options.say ?? (() => {});
  const closers: Array<() => Promise<void> | void> = [];
  let closing: Promise<void> | undefined;
  // Once, in the reverse order of starting: consumers stop before what they depend on.
  const close = () =>
    (closing ??= (async () => {
      for (const closer of [...closers].reverse()) {
        try {
          await closer();
        } catch (err) {
          options.onError?.(err);
        }
      }
    })());
  try {
    let redisUrl = options.redisUrl;
    if (redisUrl === undefined) {
      const redis = await startRedisServer();
      closers.push(() => redis.stop());
      redisUrl = redis.url;
    }
    say(`redis          ${redisUrl}`);

    const token = randomUUID();
    const api = createDevApiServer({ token });
    const apiUrl = await new Promise<string>((resolve, reject) => {
      api.server.once('error', reject);
      api.server.listen(0, '127.0.0.1', () => {
        const address = api.server.address();
        if (address === null || typeof address === 'string') reject(new Error('no address'));
        else resolve(`http://127.0.0.1:${address.port}`);
      });
    });
    closers.push(
      () =>
        new Promise<void>((resolve) => {
          api.server.closeAllConnections();
          api.server.close(() => resolve());
        }),
    );
    const dir = mkdtempSync(join(tmpdir(), 'edgeai-local-'));
    closers.push(() => rmSync(dir, { recursive: true, force: true }));
    const kubeconfigFile = join(dir, 'kubeconfig');
    writeFileSync(kubeconfigFile, kubeconfig({ server: apiUrl, token }), { mode: 0o600 });
    const kubeConfig = loadKubeConfig({ KUBECONFIG: kubeconfigFile });
    const kube = createKube(kubeConfig);
    say(`api server     ${apiUrl} (KUBECONFIG=${kubeconfigFile})`);

    // The local Redis has no password: the Secret the manifests read holds an empty one.
    await kube.create('secret', namespace, {
      metadata: { name: 'edgeai-redis-auth', namespace },
      stringData: { password: '' },
    });

    const root = fileURLToPath(options.root);
    const serving = createServingSupervisor({
      kubeConfig,
      kube,
      bundle: options.bundle,
      cwd: root,
      env: {
        KUBECONFIG: kubeconfigFile,
        MODEL_ROOT: join(root, 'models'),
        LOG_LEVEL: 'warn',
        ...options.env,
      },
      configMaps: { 'edgeai-redis': { url: redisUrl } },
      ...(options.onLog === undefined ? {} : { onLog: options.onLog }),
      ...(options.onError === undefined ? {} : { onError: options.onError }),
      restartBackoff: { initialMs: 500, maxMs: 5_000 },
      terminationGraceMs: 3_000,
    });
    await serving.start();
    closers.push(() => serving.close());

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
            onEvent: (record: BrokerRecord) =>
              options.onBrokerEvent?.(record, formatRecord(record)),
          }),
    });
    const brokerUrl = await broker.listen();
    closers.push(() => broker.close());
    say(`broker         ${brokerUrl}/${namespace}/default`);

    const pings = startPingSources({
      sources: manifests.pingSources,
      broker,
      ...(options.tickEveryMs === undefined ? {} : { everyMs: options.tickEveryMs }),
    });
    closers.push(() => pings.stop());

    const sources = await startApiServerSources({
      sources: parseApiServerSources(eventing),
      kube,
      watch: createKubeWatch(kubeConfig),
      serverUrl: apiUrl,
      brokerUrl: (ns, name) => `${brokerUrl}/${ns}/${name}`,
      ...(options.onError === undefined ? {} : { onError: options.onError }),
    });
    closers.push(() => sources.stop());

    const services = controlPlane(options.root);
    for (const service of services) await kube.create('knativeService', namespace, service);
    const names = services.map((s) => s.metadata.name ?? '');
    for (const name of names) {
      const ref = { kind: 'knativeService' as const, namespace, name };
      await waitFor(
        `Knative Service ${namespace}/${name} to be ready`,
        async () => (ready(await kube.get(ref)) ? true : undefined),
        {
          why: async () => readiness(await kube.get(ref)),
          ...(options.signal === undefined ? {} : { signal: options.signal }),
        },
      );
      say(`function       ${name.padEnd(16)} ${serving.urlOf(namespace, name) ?? ''}`);
    }
    return {
      kube,
      apiUrl,
      kubeconfigFile,
      redisUrl,
      serving,
      urlOf: (ns, name) => serving.urlOf(ns, name),
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

export { startLocalStack, waitFor, ready, readiness };
export type { LocalStack, LocalStackOptions };
