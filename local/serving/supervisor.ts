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
import { createKube, createKubeWatch, inform } from '../../shared/k8s/index.js';
import type {
  Informer,
  Kube,
  KubeObject,
  KubeWatch,
  WatchEventType,
} from '../../shared/k8s/index.js';
import { freePort } from '../redis-server.js';
import type { Phase, Revision } from './revision.js';
import { Route, reservePort } from './route.js';
import { ServiceUnit } from './service-unit.js';
import type { Context } from './service-unit.js';
import { parseMeta } from './types.js';
import type { RevisionRef } from './types.js';

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

/** What one supervisor holds between calls; the functions below take it explicitly. */
interface SupervisorState {
  readonly options: ServingSupervisorOptions;
  readonly kube: Kube;
  readonly watch: KubeWatch;
  /** The Services followed, by namespace/name. */
  readonly units: Map<string, ServiceUnit>;
  /** Every route allocated, by namespace/name, kept (its port) for the supervisor's life. */
  readonly routes: Map<string, Route>;
  /** Namespaces of Services seen or routes asked for (for the short Service URL form). */
  readonly namespaces: Set<string>;
  /** Every revision made and not yet stopped: killed if the supervisor's process exits. */
  readonly live: Set<Revision>;
  /** Stops in progress (revisions, removed Services); close() waits for them. */
  readonly stopping: Set<Promise<void>>;
  /** Ports held by routes and processes. */
  readonly usedPorts: Set<number>;
  readonly closing: AbortController;
  /** The `exit` listener: a parent that exits (an uncaught error, process.exit) kills them. */
  readonly killAll: () => void;
  /** What the ServiceUnits see of the supervisor. */
  readonly context: Context;
  informer: Informer | undefined;
  started: boolean;
}

/** A watch that ended with 410 Gone: routine, the informer lists again. */
const expired = (err: unknown) => err instanceof Error && /^watch \S+: 410 /.test(err.message);

/** The supervisor's own trouble goes to onError, else to stderr. */
function report(options: ServingSupervisorOptions, err: unknown): void {
  const error = err instanceof Error ? err : new Error(String(err));
  if (options.onError !== undefined) options.onError(error);
  else process.stderr.write(`dev serving: ${error.message}\n`);
}

/** A free port that no route or process of this supervisor holds, marked as held. */
async function pickPort(usedPorts: Set<number>): Promise<number> {
  for (let i = 0; i < 20; i++) {
    const port = await freePort();
    if (!usedPorts.has(port)) {
      usedPorts.add(port);
      return port;
    }
  }
  throw new Error('no free port found');
}

/** Builds the state of a new supervisor, with the Context its ServiceUnits get. */
function createSupervisorState(options: ServingSupervisorOptions): SupervisorState {
  const kube = options.kube ?? createKube(options.kubeConfig);
  const closing = new AbortController();
  const state: SupervisorState = {
    options,
    kube,
    watch: options.watch ?? createKubeWatch(options.kubeConfig),
    units: new Map(),
    routes: new Map(),
    namespaces: new Set(),
    live: new Set(),
    stopping: new Set(),
    usedPorts: new Set(),
    closing,
    killAll: () => {
      for (const revision of state.live) revision.killNow();
    },
    context: {
      kube,
      options,
      defaultNode: options.defaultNode ?? hostname(),
      backoff: {
        initialMs: options.restartBackoff?.initialMs ?? 1000,
        maxMs: options.restartBackoff?.maxMs ?? 30_000,
      },
      graceMs: options.terminationGraceMs ?? 10_000,
      closing: closing.signal,
      pickPort: () => pickPort(state.usedPorts),
      releasePort: (port) => state.usedPorts.delete(port),
      launched: (revision) => {
        state.live.add(revision);
      },
      retire: (revision) => retire(state, revision),
      route: (namespace, name) => serviceRoute(state, namespace, name),
      isNamespace: (namespace) => state.namespaces.has(namespace),
      report: (err) => report(options, err),
    },
    informer: undefined,
    started: false,
  };
  return state;
}

/** Stops a revision; close() waits for it. */
function retire(state: SupervisorState, revision: Revision): Promise<void> {
  const done = revision.stop().finally(() => {
    state.live.delete(revision);
    state.stopping.delete(done);
  });
  state.stopping.add(done);
  return done;
}

/** The Service's route, allocated the first time; opened again if it was closed. */
function serviceRoute(state: SupervisorState, namespace: string, name: string): Route {
  const key = `${namespace}/${name}`;
  let found = state.routes.get(key);
  if (found === undefined) {
    const port = reservePort(state.usedPorts);
    state.usedPorts.add(port);
    found = new Route({
      namespace,
      name,
      port,
      target: () =>
        state.units.get(key)?.target() ?? {
          unavailable: `Knative Service ${key} does not exist (no revision to route to)`,
        },
      report: (err) => report(state.options, err),
    });
    state.routes.set(key, found);
    state.namespaces.add(namespace);
  }
  if (!state.closing.signal.aborted) found.listen();
  return found;
}

/** Stops the Service's processes, then closes its route unless the name is back meanwhile. */
function removeService(state: SupervisorState, key: string): void {
  const unit = state.units.get(key);
  if (unit === undefined) return;
  state.units.delete(key);
  const done = unit
    .remove()
    .then(() => (state.units.has(key) ? undefined : state.routes.get(key)?.close()))
    .finally(() => state.stopping.delete(done));
  state.stopping.add(done);
}

/** A listed, added or modified Service: its unit (made if new) sees the new state. */
function upsertService(state: SupervisorState, object: unknown): void {
  const meta = parseMeta(object);
  if (meta === undefined) {
    report(
      state.options,
      new Error('a watched Knative Service has no name, namespace, uid or generation'),
    );
    return;
  }
  const key = `${meta.namespace}/${meta.name}`;
  let unit = state.units.get(key);
  if (unit !== undefined && unit.uid !== meta.uid) {
    // Deleted and created again under the same name while we were not watching.
    removeService(state, key);
    unit = undefined;
  }
  if (unit === undefined) {
    unit = new ServiceUnit(meta, object, state.context);
    state.units.set(key, unit);
  }
  unit.observe(object as KubeObject, meta);
}

/** The informer's handler: every change to a Knative Service. */
function serviceChanged(state: SupervisorState, type: WatchEventType, object: KubeObject): void {
  if (state.closing.signal.aborted) return; // close() ran while a list or an event was on its way
  if (type !== 'DELETED') {
    upsertService(state, object);
    return;
  }
  const meta = parseMeta(object);
  const key = meta === undefined ? undefined : `${meta.namespace}/${meta.name}`;
  if (key !== undefined && state.units.get(key)?.uid === meta?.uid) removeService(state, key);
}

/** The informer: errors before the first list reject `firstFailure`, later ones reported. */
function follow(state: SupervisorState): { informer: Informer; firstFailure: Promise<never> } {
  let synced = false;
  let failFirst: (err: unknown) => void = () => {};
  const firstFailure = new Promise<never>((_, reject) => (failFirst = reject));
  const informer = inform(
    { kube: state.kube, watch: state.watch },
    'knativeService',
    {},
    (type, object) => serviceChanged(state, type, object),
    {
      onError: (err) => {
        if (!synced) failFirst(err);
        else if (!expired(err))
          report(
            state.options,
            new Error(
              `watching Knative Services: ${err instanceof Error ? err.message : String(err)}`,
              { cause: err },
            ),
          );
      },
    },
  );
  state.informer = informer;
  void informer.synced.then(() => (synced = true));
  return { informer, firstFailure };
}

/** start(): resolves once the first list is handled; if that fails, rejects (start again later). */
async function startSupervisor(state: SupervisorState): Promise<void> {
  if (state.started) throw new Error('the serving supervisor is already started');
  state.started = true;
  process.on('exit', state.killAll);
  const { signal } = state.closing;
  const closed = new Promise<void>((resolve) =>
    signal.addEventListener('abort', () => resolve(), { once: true }),
  );
  const { informer, firstFailure } = follow(state);
  try {
    await Promise.race([informer.synced, firstFailure, closed]);
  } catch (err) {
    informer.stop();
    state.informer = undefined;
    process.off('exit', state.killAll);
    state.started = false;
    throw err;
  }
  if (signal.aborted) {
    informer.stop();
    process.off('exit', state.killAll);
  }
}

/** processes(): every revision of every Service, for display and tests. */
function listProcesses(state: SupervisorState): ServingProcess[] {
  return [...state.units.values()].flatMap((unit) =>
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
  );
}

/** close(): stops following, then every Service's processes, then every route. */
async function closeSupervisor(state: SupervisorState): Promise<void> {
  state.closing.abort();
  state.informer?.stop();
  for (const key of [...state.units.keys()]) removeService(state, key);
  while (state.stopping.size > 0) await Promise.all([...state.stopping]);
  await Promise.all([...state.routes.values()].map((r) => r.close()));
  process.off('exit', state.killAll);
}

/**
 * Builds the supervisor; see the file comment. Each Service is a ServiceUnit (service-unit.ts);
 * the state they share and the functions above hold the rest.
 */
function createServingSupervisor(options: ServingSupervisorOptions): ServingSupervisor {
  const state = createSupervisorState(options);
  return {
    start: () => startSupervisor(state),
    urlOf: (namespace, name) => state.units.get(`${namespace}/${name}`)?.url,
    routeUrl: (namespace, name) => serviceRoute(state, namespace, name).url,
    processes: () => listProcesses(state),
    close: () => closeSupervisor(state),
  };
}

export { createServingSupervisor };
export type { LogSource, ServingProcess, ServingSupervisor, ServingSupervisorOptions };
