/**
 * The development Knative Serving: for each Knative Service in the API server (all namespaces),
 * one local process per revision — `node <bundle>` by default, with the environment the
 * container spec asks for — and the Service's status written through /status as Knative
 * Serving writes it. A new generation starts a new revision; once it is ready, traffic (the
 * status URL, `urlOf`) moves to it and the old process is stopped. A process that exits is
 * restarted with exponential backoff. A deleted Service's processes are stopped. See
 * docs/dev-serving.md.
 */
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import type { KubeConfig } from '@kubernetes/client-node';
import { NotFoundError } from '../../errors/index.js';
import { createKube } from '../../k8s/index.js';
import type { Kube, KubeObject } from '../../k8s/index.js';
import { freePort } from '../redis-server.js';
import { resolveContainerEnv, secretData } from './env.js';
import { Revision } from './revision.js';
import type { Launch, Phase } from './revision.js';
import { serviceStatus, storedConditions } from './status.js';
import type { Condition, ServiceView } from './status.js';
import { hostnameLabel, parseMeta, parseSpec, revisionName, servingContainer } from './types.js';
import type { RevisionRef, ServiceMeta, ServiceSpec } from './types.js';
import { watchServices } from './watch.js';
import type { ServiceWatch } from './watch.js';

/** Where a process's output line came from. */
type LogSource = RevisionRef & { stream: 'stdout' | 'stderr' };

interface ServingSupervisorOptions {
  /** The API server (the development one: its kubeconfig); the watch is made from it. */
  kubeConfig: KubeConfig;
  /** The client for lists, Secrets and status writes; by default createKube(kubeConfig). */
  kube?: Kube;
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
  url: string | undefined;
  restarts: number;
  failure: string | undefined;
}

interface ServingSupervisor {
  /** Lists the Services, starts their processes and watches; resolves once the list is handled. */
  start(): Promise<void>;
  /**
   * The URL of the Service's ready revision (the one traffic goes to, kept while it restarts
   * after a crash), or undefined while none has become ready.
   */
  urlOf(namespace: string, name: string): string | undefined;
  processes(): ServingProcess[];
  /** Stops the watch and every process (SIGTERM, then SIGKILL after the grace period). */
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

  constructor(
    meta: ServiceMeta,
    object: unknown,
    private readonly context: Context,
  ) {
    this.namespace = meta.namespace;
    this.name = meta.name;
    this.uid = meta.uid;
    this.#conditions = storedConditions(object);
  }

  get url(): string | undefined {
    return this.#routed?.url;
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
        env: {
          ...(path === undefined ? {} : { PATH: path }),
          ...env,
          // What Knative sets in every container.
          PORT: String(port),
          K_SERVICE: service,
          K_CONFIGURATION: service,
          K_REVISION: name,
          ...context.options.env,
        },
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
              url: routed.url ?? '',
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

function createServingSupervisor(options: ServingSupervisorOptions): ServingSupervisor {
  const kube = options.kube ?? createKube(options.kubeConfig);
  const units = new Map<string, ServiceUnit>();
  const live = new Set<Revision>();
  const stopping = new Set<Promise<void>>();
  const usedPorts = new Set<number>();
  const closing = new AbortController();
  let watch: ServiceWatch | undefined;
  let loop: Promise<void> | undefined;
  let started = false;

  const report = (err: unknown) => {
    const error = err instanceof Error ? err : new Error(String(err));
    if (options.onError !== undefined) options.onError(error);
    else process.stderr.write(`dev serving: ${error.message}\n`);
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
    report,
  };

  // A parent that exits (an uncaught error, process.exit) takes its processes with it.
  const killAll = () => {
    for (const revision of live) revision.killNow();
  };

  const remove = (key: string) => {
    const unit = units.get(key);
    if (unit === undefined) return;
    units.delete(key);
    const done = unit.remove().finally(() => stopping.delete(done));
    stopping.add(done);
  };

  const upsert = (object: unknown) => {
    if (closing.signal.aborted) return; // close() ran while a list was on its way
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

  /** Lists every Service, reconciles the units with the list; the list's resourceVersion. */
  const sync = async (): Promise<string> => {
    const { items, resourceVersion } = await kube.list('knativeService');
    const seen = new Set<string>();
    for (const item of items) {
      seen.add(`${item.metadata.namespace ?? ''}/${item.metadata.name}`);
      upsert(item);
    }
    for (const key of [...units.keys()]) if (!seen.has(key)) remove(key);
    return resourceVersion;
  };

  const run = async (from: string): Promise<void> => {
    let resourceVersion = from;
    while (!closing.signal.aborted) {
      const since = Date.now();
      watch = watchServices(options.kubeConfig, resourceVersion, (type, object) => {
        if (closing.signal.aborted) return;
        const meta = parseMeta(object);
        const version = (object as { metadata?: { resourceVersion?: unknown } } | null)?.metadata
          ?.resourceVersion;
        if (typeof version === 'string' && version !== '') resourceVersion = version;
        if (type === 'DELETED') {
          const key = meta === undefined ? undefined : `${meta.namespace}/${meta.name}`;
          if (key !== undefined && units.get(key)?.uid === meta?.uid) remove(key);
        } else upsert(object);
      });
      const end = await watch.ended;
      if (closing.signal.aborted) return;
      if (end.kind === 'closed') {
        // Resume from the last event; a server that keeps closing at once is not hammered.
        if (Date.now() - since < 1000)
          await sleep(1000, undefined, { signal: closing.signal }).catch(() => {});
        continue;
      }
      if (end.kind === 'failed') {
        report(new Error(`watching Knative Services: ${end.error.message}`));
        await sleep(1000, undefined, { signal: closing.signal }).catch(() => {});
      }
      // Expired or failed: what happened meanwhile is known only from a new list.
      while (!closing.signal.aborted) {
        try {
          resourceVersion = await sync();
          break;
        } catch (err) {
          report(err);
          await sleep(1000, undefined, { signal: closing.signal }).catch(() => {});
        }
      }
    }
  };

  return {
    async start() {
      if (started) throw new Error('the serving supervisor is already started');
      started = true;
      process.on('exit', killAll);
      let resourceVersion: string;
      try {
        resourceVersion = await sync();
      } catch (err) {
        process.off('exit', killAll);
        started = false;
        throw err;
      }
      if (closing.signal.aborted) process.off('exit', killAll);
      else loop = run(resourceVersion).catch(report);
    },
    urlOf: (namespace, name) => units.get(`${namespace}/${name}`)?.url,
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
      watch?.abort();
      for (const key of [...units.keys()]) remove(key);
      while (stopping.size > 0) await Promise.all([...stopping]);
      await loop;
      process.off('exit', killAll);
    },
  };
}

export { createServingSupervisor };
export type { LogSource, ServingProcess, ServingSupervisor, ServingSupervisorOptions };
