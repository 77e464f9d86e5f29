/**
 * One Knative Service of the development Serving (see supervisor.ts): its revisions — the newest
 * one and the one traffic goes to — and its status writes. `Context` is what it needs of the
 * supervisor: the API client, options, ports, routes and the retiring of revisions.
 */
import { NotFoundError } from '../../shared/errors/index.js';
import type { Kube, KubeObject } from '../../shared/k8s/index.js';
import { resolveContainerEnv, secretData } from './env.js';
import { Revision } from './revision.js';
import type { Launch } from './revision.js';
import type { Route, RouteTarget } from './route.js';
import { rewriteServiceUrls } from './service-url.js';
import { serviceStatus, storedConditions } from './status.js';
import type { Condition, ServiceView } from './status.js';
import type { ServingSupervisorOptions } from './supervisor.js';
import { hostnameLabel, parseSpec, revisionName, servingContainer } from './types.js';
import type { ServiceMeta, ServiceSpec } from './types.js';

/** What a ServiceUnit reaches of its supervisor. */
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

export { ServiceUnit };
export type { Context };
