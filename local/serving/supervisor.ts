/**
 * The development Knative Serving: for each Knative Service in the API server (all namespaces),
 * one local process per revision — `node <bundle>` by default, with the environment the
 * container spec asks for — and the Service's status written through /status as Knative
 * Serving writes it. Each Service has a stable local route (a reverse proxy on a port of its
 * own) in front of its revisions. A new generation starts a new revision; once it is ready,
 * traffic moves to it and the old process is stopped. A process that exits is restarted with
 * exponential backoff. A deleted Service's processes are stopped, then its route is closed.
 * Services are followed through the shared/k8s informer. See docs/dev-serving.md.
 */
import { hostname } from 'node:os';
import { NotFoundError } from '../../shared/errors/index.js';
import { createKube, createKubeWatch, inform } from '../../shared/k8s/index.js';
import type {
  Informer,
  Kube,
  KubeObject,
  KubeWatch,
  WatchEventType,
} from '../../shared/k8s/index.js';
import { freePort } from '../redis-server.js';
import { resolveContainerEnv, secretData } from './env.js';
import { Revision } from './revision.js';
import type { Launch, Phase } from './revision.js';
import { Route, reservePort } from './route.js';
import type { RouteTarget } from './route.js';
import { rewriteServiceUrls } from './service-url.js';
import { serviceStatus, storedConditions } from './status.js';
import type { Condition, ServiceView } from './status.js';
import { hostnameLabel, parseMeta, parseSpec, revisionName, servingContainer } from './types.js';
import type { RevisionRef, ServiceMeta, ServiceSpec } from './types.js';

/** The API server's connection settings, as loadKubeConfig (shared/k8s) gives them. */
type KubeConfig = Parameters<typeof createKube>[0];

/** Where a process's output line came from. */
type LogSource = RevisionRef & { stream: 'stdout' | 'stderr' };

interface ServingSupervisorOptions {
  /** The API server (the development one: its kubeconfig). */
  kubeConfig: KubeConfig;
  /** The client for lists, Secrets and status writes; by default createKube(kubeConfig). */
  kube?: Kube;
  /** The watches of Knative Services; by default createKubeWatch(kubeConfig). */
  watch?: KubeWatch;
  /** The program every revision runs as `node <bundle>` (dist/bundle/serve.mjs). */
  bundle: string;
  /** The processes' working directory (the bundle reads models/ and data/ relative to it). */
  cwd?: string;
  /** Set last, over the container's env, PORT and K_*: REDIS_URL, LOG_LEVEL, MODEL_ROOT... */
  env?: Readonly<Record<string, string>>;
  /** ConfigMaps by name, for configMapKeyRef and envFrom configMapRef (any namespace). */
  configMaps?: Readonly<Record<string, Readonly<Record<string, string>>>>;
  /** spec.nodeName for a Service with no kubernetes.io/hostname nodeSelector; the host name. */
  defaultNode?: string;
  /** Runs something else than `node <bundle>` for a Service (tests). */
  command?: (service: KubeObject) => { command: string; args: readonly string[] };
  /** Every line a process writes (not printed otherwise). */
  onLog?: (source: LogSource, line: string) => void;
  /** The supervisor's own trouble (API server unreachable, a status write refused). */
  onError?: (err: Error) => void;
  /** Restart delays: initialMs doubled per failure in a row up to maxMs (1 s to 30 s). */
  restartBackoff?: { initialMs?: number; maxMs?: number };
  /** From SIGTERM to SIGKILL when a process is stopped (10 s). */
  terminationGraceMs?: number;
}

/** One process the supervisor runs (or restarts), for display and tests. */
interface ServingProcess extends RevisionRef {
  generation: number;
  phase: Phase;
  /** Traffic goes to this revision. */
  routed: boolean;
  pid: number | undefined;
  port: number | undefined;
  /** The process's own URL (its port), not the Service's route. */
  url: string | undefined;
  restarts: number;
  failure: string | undefined;
}

interface ServingSupervisor {
  /** Lists the Services, starts their processes and watches; resolves once the list is handled. */
  start(): Promise<void>;
  /**
   * The Service's route URL once a revision of it has become ready (kept while that revision
   * restarts after a crash and across rollouts), or undefined while none has.
   */
  urlOf(namespace: string, name: string): string | undefined;
  /**
   * The Service's route URL now, whether or not the Service exists yet: its port is chosen the
   * first time the Service is seen or its URL asked for, and kept for the supervisor's life.
   * The route answers 503 until a revision is ready.
   */
  routeUrl(namespace: string, name: string): string;
  processes(): ServingProcess[];
  /**
   * Stops the watch, every process (SIGTERM, then SIGKILL after the grace period) and every
   * route.
   */
  close(): Promise<void>;
}

interface Context {
  kube: Kube;
  options: ServingSupervisorOptions;
  defaultNode: string;
  backoff: { initialMs: number; maxMs: number };
  graceMs: number;
  closing: AbortSignal;
  pickPort: () => Promise<number>;
  releasePort: (port: number) => void;
  /** A revision was made: it is killed with the supervisor's process. */
  launched(revision: Revision): void;
  /** Stops a revision; close() waits for it. */
  retire(revision: Revision): Promise<void>;
  /** The Service's route, listening (allocated if it was not). */
  route(namespace: string, name: string): Route;
  /** Whether a Service has been seen in the namespace, or a route asked for in it. */
  isNamespace(namespace: string): boolean;
  report(err: unknown): void;
}

const statusRetryMs = 1000;

/** One Knative Service: its revisions and its status writes. */
class ServiceUnit {
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
  #generation = 0;
  #latest: Revision | undefined;
  #latestName = '';
  #invalid: string | undefined;
  /** The revision traffic goes to: the newest that became ready. */
  #routed: Revision | undefined;
  #conditions: Condition[];
  #written: string | undefined;
  #writes: Promise<void> = Promise.resolve();
  #retry: NodeJS.Timeout | undefined;
  #removed = false;
  readonly #route: Route;

  constructor(
    meta: ServiceMeta,
    object: unknown,
    private readonly context: Context,
  ) {
    this.namespace = meta.namespace;
    this.name = meta.name;
    this.uid = meta.uid;
    this.#conditions = storedConditions(object);
    this.#route = context.route(meta.namespace, meta.name);
  }

  /** The route's URL once a revision has become ready. */
  get url(): string | undefined {
    return this.#routed === undefined ? undefined : this.#route.url;
  }

  /** Where the route sends a request now. */
  target(): RouteTarget {
    const service = `Knative Service ${this.namespace}/${this.name}`;
    const routed = this.#routed;
    if (routed === undefined) {
      const latest = this.#latest;
      const why =
        latest === undefined
          ? (this.#invalid ?? 'no revision')
          : latest.phase === 'failed'
            ? `${latest.ref.revision}: ${latest.failure ?? 'failed'}`
            : `${latest.ref.revision} is starting`;
      return { unavailable: `${service} has no ready revision (${why})` };
    }
    if (routed.phase !== 'ready' || routed.port === undefined) {
      return {
        unavailable: `${service}: revision ${routed.ref.revision} is not ready (${routed.failure ?? 'restarting'})`,
      };
    }
    return { revision: routed.ref.revision, port: routed.port };
  }

  revisions(): Array<{ revision: Revision; routed: boolean }> {
    const list = this.#routed === undefined ? [] : [{ revision: this.#routed, routed: true }];
    if (this.#latest !== undefined && this.#latest !== this.#routed)
      list.push({ revision: this.#latest, routed: false });
    return list;
  }

  /** A watched or listed state of the Service: a new generation makes a new revision. */
  observe(object: KubeObject, meta: ServiceMeta): void {
    if (this.#removed || meta.generation <= this.#generation) return;
    this.#generation = meta.generation;
    const parsed = parseSpec(object);
    const spec = 'spec' in parsed ? parsed.spec : undefined;
    const name = revisionName(meta.name, meta.generation, spec);
    // A revision that never became ready is superseded by the newer one (Knative would leave it
    // scaled to zero); the routed one keeps serving until its successor is ready.
    const superseded = this.#latest !== this.#routed ? this.#latest : undefined;
    this.#latest = undefined;
    this.#latestName = name;
    this.#invalid = undefined;
    if (spec === undefined) {
      this.#invalid = 'problem' in parsed ? parsed.problem : 'invalid spec';
    } else {
      const revision = this.#revision(object, spec, name, meta.generation);
      this.#latest = revision;
      this.context.launched(revision);
      revision.start();
    }
    if (superseded !== undefined) void this.context.retire(superseded);
    this.writeStatus();
  }

  #revision(object: KubeObject, spec: ServiceSpec, name: string, generation: number): Revision {
    const { context, namespace } = this;
    const service = this.name;
    const container = servingContainer(spec);
    const node = spec.template.spec.nodeSelector?.[hostnameLabel] ?? context.defaultNode;
    const ref = { namespace, name: service, revision: name };
    const launch = async (port: number): Promise<Launch> => {
      const env = await resolveContainerEnv(container, {
        namespace,
        configMaps: context.options.configMaps ?? {},
        readSecret: async (secret) => {
          try {
            const found = await context.kube.get({ kind: 'secret', namespace, name: secret });
            return secretData(found as { data?: Record<string, string> });
          } catch (err) {
            if (err instanceof NotFoundError) return undefined;
            throw new Error(
              `cannot read Secret ${namespace}/${secret}: ${err instanceof Error ? err.message : String(err)}`,
              { cause: err },
            );
          }
        },
        fields: {
          'metadata.name': `${name}-deployment`,
          'metadata.namespace': namespace,
          'spec.nodeName': node,
          'spec.serviceAccountName': spec.template.spec.serviceAccountName ?? 'default',
          'status.podIP': '127.0.0.1',
          'status.hostIP': '127.0.0.1',
        },
      });
      const path = process.env['PATH'];
      const run = context.options.command?.(object) ?? {
        command: process.execPath,
        args: [context.options.bundle],
      };
      return {
        command: run.command,
        args: run.args,
        cwd: context.options.cwd,
        // Cluster-local Service URLs become the Services' routes (asking allocates them).
        env: rewriteServiceUrls(
          {
            ...(path === undefined ? {} : { PATH: path }),
            ...env,
            // What Knative sets in every container.
            PORT: String(port),
            K_SERVICE: service,
            K_CONFIGURATION: service,
            K_REVISION: name,
            ...context.options.env,
          },
          {
            routeUrl: (ns, svc) => context.route(ns, svc).url,
            isNamespace: (ns) => context.isNamespace(ns),
          },
        ),
      };
    };
    const revision = new Revision({
      ref,
      generation,
      probe: container.readinessProbe,
      launch,
      pickPort: context.pickPort,
      releasePort: context.releasePort,
      backoff: context.backoff,
      graceMs: context.graceMs,
      onLog: context.options.onLog,
      onChange: () => this.#changed(revision),
    });
    return revision;
  }

  #changed(revision: Revision): void {
    if (this.#removed) return;
    if (revision === this.#latest && revision.phase === 'ready' && this.#routed !== revision) {
      // The rollout: traffic moves to the ready revision, then the old one is stopped.
      const old = this.#routed;
      this.#routed = revision;
      if (old !== undefined) void this.context.retire(old);
    }
    this.writeStatus();
  }

  #view(): ServiceView {
    const latest = this.#latest;
    const routed = this.#routed;
    return {
      name: this.name,
      generation: this.#generation,
      latest:
        latest === undefined
          ? { revision: this.#latestName, invalid: this.#invalid ?? 'invalid spec' }
          : { revision: latest.ref.revision, phase: latest.phase, failure: latest.failure },
      routed:
        routed === undefined
          ? undefined
          : {
              revision: routed.ref.revision,
              url: this.#route.url,
              up: routed.phase === 'ready',
              failure: routed.failure,
            },
    };
  }

  /** Queues a write of the current status; writes are in order and skip what is already written. */
  writeStatus(): void {
    clearTimeout(this.#retry);
    this.#writes = this.#writes.then(() => this.#write());
  }

  async #write(): Promise<void> {
    if (this.#removed || this.#generation === 0) return;
    const status = serviceStatus(this.#view(), this.#conditions, new Date());
    this.#conditions = status.conditions;
    const text = JSON.stringify(status);
    if (text === this.#written) return;
    try {
      await this.context.kube.patchStatus(
        { kind: 'knativeService', namespace: this.namespace, name: this.name },
        { status },
      );
      this.#written = text;
    } catch (err) {
      if (err instanceof NotFoundError || this.#removed) return;
      this.context.report(err);
      if (!this.context.closing.aborted)
        this.#retry = setTimeout(() => this.writeStatus(), statusRetryMs);
    }
  }

  /** The Service is gone (or the supervisor closes): stop its processes, write nothing more. */
  async remove(): Promise<void> {
    this.#removed = true;
    clearTimeout(this.#retry);
    await Promise.all(this.revisions().map(({ revision }) => this.context.retire(revision)));
    await this.#writes;
  }
}

/** A watch that ended with 410 Gone: routine, the informer lists again. */
const expired = (err: unknown) => err instanceof Error && /^watch \S+: 410 /.test(err.message);

function createServingSupervisor(options: ServingSupervisorOptions): ServingSupervisor {
  const kube = options.kube ?? createKube(options.kubeConfig);
  const watch = options.watch ?? createKubeWatch(options.kubeConfig);
  const units = new Map<string, ServiceUnit>();
  /** Every route allocated, by namespace/name, kept (its port) for the supervisor's life. */
  const routes = new Map<string, Route>();
  const namespaces = new Set<string>();
  const live = new Set<Revision>();
  const stopping = new Set<Promise<void>>();
  const usedPorts = new Set<number>();
  const closing = new AbortController();
  let informer: Informer | undefined;
  let started = false;

  const report = (err: unknown) => {
    const error = err instanceof Error ? err : new Error(String(err));
    if (options.onError !== undefined) options.onError(error);
    else process.stderr.write(`dev serving: ${error.message}\n`);
  };

  /** The Service's route, allocated the first time; opened again if it was closed. */
  const route = (namespace: string, name: string): Route => {
    const key = `${namespace}/${name}`;
    let found = routes.get(key);
    if (found === undefined) {
      const port = reservePort(usedPorts);
      usedPorts.add(port);
      found = new Route({
        namespace,
        name,
        port,
        target: () =>
          units.get(key)?.target() ?? {
            unavailable: `Knative Service ${key} does not exist (no revision to route to)`,
          },
        report,
      });
      routes.set(key, found);
      namespaces.add(namespace);
    }
    if (!closing.signal.aborted) found.listen();
    return found;
  };

  const context: Context = {
    kube,
    options,
    defaultNode: options.defaultNode ?? hostname(),
    backoff: {
      initialMs: options.restartBackoff?.initialMs ?? 1000,
      maxMs: options.restartBackoff?.maxMs ?? 30_000,
    },
    graceMs: options.terminationGraceMs ?? 10_000,
    closing: closing.signal,
    pickPort: async () => {
      for (let i = 0; i < 20; i++) {
        const port = await freePort();
        if (!usedPorts.has(port)) {
          usedPorts.add(port);
          return port;
        }
      }
      throw new Error('no free port found');
    },
    releasePort: (port) => usedPorts.delete(port),
    launched: (revision) => {
      live.add(revision);
    },
    retire: (revision) => {
      const done = revision.stop().finally(() => {
        live.delete(revision);
        stopping.delete(done);
      });
      stopping.add(done);
      return done;
    },
    route,
    isNamespace: (namespace) => namespaces.has(namespace),
    report,
  };

  // A parent that exits (an uncaught error, process.exit) takes its processes with it.
  const killAll = () => {
    for (const revision of live) revision.killNow();
  };

  /** Stops the Service's processes, then closes its route unless the name is back meanwhile. */
  const remove = (key: string) => {
    const unit = units.get(key);
    if (unit === undefined) return;
    units.delete(key);
    const done = unit
      .remove()
      .then(() => (units.has(key) ? undefined : routes.get(key)?.close()))
      .finally(() => stopping.delete(done));
    stopping.add(done);
  };

  const upsert = (object: unknown) => {
    const meta = parseMeta(object);
    if (meta === undefined) {
      report(new Error('a watched Knative Service has no name, namespace, uid or generation'));
      return;
    }
    const key = `${meta.namespace}/${meta.name}`;
    let unit = units.get(key);
    if (unit !== undefined && unit.uid !== meta.uid) {
      remove(key); // deleted and created again under the same name while we were not watching
      unit = undefined;
    }
    if (unit === undefined) {
      unit = new ServiceUnit(meta, object, context);
      units.set(key, unit);
    }
    unit.observe(object as KubeObject, meta);
  };

  const changed = (type: WatchEventType, object: KubeObject) => {
    if (closing.signal.aborted) return; // close() ran while a list or an event was on its way
    if (type !== 'DELETED') {
      upsert(object);
      return;
    }
    const meta = parseMeta(object);
    const key = meta === undefined ? undefined : `${meta.namespace}/${meta.name}`;
    if (key !== undefined && units.get(key)?.uid === meta?.uid) remove(key);
  };

  return {
    async start() {
      if (started) throw new Error('the serving supervisor is already started');
      started = true;
      process.on('exit', killAll);
      // A first list that fails fails start(); later trouble is reported and retried.
      let synced = false;
      let failFirst: (err: unknown) => void = () => {};
      const firstFailure = new Promise<never>((_, reject) => (failFirst = reject));
      const closed = new Promise<void>((resolve) =>
        closing.signal.addEventListener('abort', () => resolve(), { once: true }),
      );
      const current = inform({ kube, watch }, 'knativeService', {}, changed, {
        onError: (err) => {
          if (!synced) failFirst(err);
          else if (!expired(err))
            report(
              new Error(
                `watching Knative Services: ${err instanceof Error ? err.message : String(err)}`,
                { cause: err },
              ),
            );
        },
      });
      informer = current;
      void current.synced.then(() => (synced = true));
      try {
        await Promise.race([current.synced, firstFailure, closed]);
      } catch (err) {
        current.stop();
        informer = undefined;
        process.off('exit', killAll);
        started = false;
        throw err;
      }
      if (closing.signal.aborted) {
        current.stop();
        process.off('exit', killAll);
      }
    },
    urlOf: (namespace, name) => units.get(`${namespace}/${name}`)?.url,
    routeUrl: (namespace, name) => route(namespace, name).url,
    processes: () =>
      [...units.values()].flatMap((unit) =>
        unit.revisions().map(({ revision, routed }) => ({
          ...revision.ref,
          generation: revision.generation,
          phase: revision.phase,
          routed,
          pid: revision.pid,
          port: revision.port,
          url: revision.url,
          restarts: revision.restarts,
          failure: revision.failure,
        })),
      ),
    async close() {
      closing.abort();
      informer?.stop();
      for (const key of [...units.keys()]) remove(key);
      while (stopping.size > 0) await Promise.all([...stopping]);
      await Promise.all([...routes.values()].map((r) => r.close()));
      process.off('exit', killAll);
    },
  };
}

export { createServingSupervisor };
export type { LogSource, ServingProcess, ServingSupervisor, ServingSupervisorOptions };
