/**
 * The one reconcile engine, for every kind the control plane owns (controller-runtime's shape):
 * observe the resource, the Knative Services it controls (ownership.ts: the controller
 * ownerReference with its uid) and what else its kind reads; decide with the kind's pure
 * function; apply, the status first and conditional on its resourceVersion. A conflict re-runs
 * the pass for that one resource from fresh reads, a few times. A tick lists every kind and all
 * managed Services once; an event reads one resource and its Services.
 *
 * A kind is a registration (defineKind): its inputs, its desired state and its decision.
 */
import pMap from 'p-map';
import { UnavailableError } from '../errors/index.js';
import { findObject, kinds as kubeKinds } from '../k8s/index.js';
import type { Kube, KubeObject } from '../k8s/index.js';
import type { Logger } from '../telemetry/index.js';
import type { Action, DecideOptions } from './actions.js';
import { applyActions } from './apply.js';
import type { ApplyContext, ApplyResult } from './apply.js';
import { managedBy } from './knative-service.js';
import { controlledBy } from './ownership.js';
import type { OwnerKind } from './ownership.js';

/** What a kind's decision sees of the cluster. */
interface Observed<Owner extends KubeObject, Inputs> {
  owner: Owner;
  /** The Knative Services the owner controls, by name. */
  owned: ReadonlyMap<string, KubeObject>;
  /**
   * Names the owner wants that a Knative Service it does not control holds (someone else's):
   * creating them would fail on every pass, so the decision says why instead.
   */
  taken: readonly string[];
  inputs: Inputs;
}

/** A kind whose objects others name (a Model, a Dataset): an event about one reconciles its users. */
type ReferencedKind = 'model' | 'dataset';

/** Everything the engine needs to know of a kind. */
interface ResourceKind<Owner extends KubeObject, Inputs, Desired> {
  kind: OwnerKind;
  /** The label selector matching one owner's Services (an event lists with it). */
  selector(name: string): string;
  /** What its desired state reads besides the owner and its Services, for one owner. */
  inputs(kube: Kube, owner: Owner): Promise<Inputs>;
  /** The same for a tick, read once for every owner (default: inputs() per owner). */
  tickInputs?(kube: Kube): Promise<(owner: Owner) => Inputs | Promise<Inputs>>;
  /** Pure: what the owner asks for, or why it cannot be deployed. */
  desired(owner: Owner, inputs: Inputs): Desired;
  /** The Service names `desired` wants; one missing from the list is looked up by name. */
  wanted(desired: Desired): readonly string[];
  /** Pure: the writes that close the gap (no write when nothing differs). */
  decide(
    observed: Observed<Owner, Inputs>,
    desired: Desired,
    now: Date,
    options: DecideOptions,
  ): Action[];
  /** The other kinds whose change concerns the owners that name them. */
  uses?: ReadonlyArray<{ kind: ReferencedKind; by(owner: Owner, name: string): boolean }>;
}

/** What one pass reads and writes with. */
interface PassContext {
  kube: Kube;
  now: () => Date;
  options: DecideOptions;
  apply: Omit<ApplyContext, 'owner'>;
}

type PassOne = (
  context: PassContext,
  owner: KubeObject,
  listed: ReadonlyMap<string, KubeObject>,
) => Promise<ApplyResult>;

/** A kind as the engine runs it, its types closed over. */
interface Registration {
  kind: OwnerKind;
  selector(name: string): string;
  pass: PassOne;
  /** Reads a tick's inputs once; the pass it returns uses them. */
  tickPass(kube: Kube): Promise<PassOne>;
  uses(kind: ReferencedKind, owner: KubeObject, name: string): boolean;
}

/**
 * Wanted Services not among those the owner controls: one listed but controlled by another is
 * taken; one the list missed is looked up by name (it may have appeared since the list).
 */
async function lookUpMissing(
  kube: Kube,
  kind: OwnerKind,
  owner: KubeObject,
  wanted: readonly string[],
  listed: ReadonlyMap<string, KubeObject>,
  owned: Map<string, KubeObject>,
): Promise<string[]> {
  const taken: string[] = [];
  const namespace = owner.metadata.namespace ?? '';
  for (const name of wanted) {
    if (owned.has(name)) continue;
    const found =
      listed.get(name) ?? (await findObject(kube, { kind: 'knativeService', namespace, name }));
    if (found === undefined) continue;
    if (controlledBy(found, kind, owner)) owned.set(name, found);
    else taken.push(name);
  }
  return taken;
}

async function pass<Owner extends KubeObject, Inputs, Desired>(
  kind: ResourceKind<Owner, Inputs, Desired>,
  context: PassContext,
  owner: Owner,
  listed: ReadonlyMap<string, KubeObject>,
  inputs: Inputs,
): Promise<ApplyResult> {
  const { kube } = context;
  const desired = kind.desired(owner, inputs);
  const owned = new Map([...listed].filter(([, s]) => controlledBy(s, kind.kind, owner)));
  const taken = await lookUpMissing(kube, kind.kind, owner, kind.wanted(desired), listed, owned);
  const actions = kind.decide({ owner, owned, taken, inputs }, desired, context.now(), {
    ...context.options,
  });
  return applyActions(kube, owner, actions, { ...context.apply, owner: kind.kind });
}

/** A kind registered with the engine. Owners are read from the API server, specs unchecked. */
function defineKind<Owner extends KubeObject, Inputs, Desired>(
  kind: ResourceKind<Owner, Inputs, Desired>,
): Registration {
  const passOne: PassOne = async (context, owner, listed) =>
    pass(kind, context, owner as Owner, listed, await kind.inputs(context.kube, owner as Owner));
  return {
    kind: kind.kind,
    selector: (name) => kind.selector(name),
    pass: passOne,
    async tickPass(kube) {
      if (kind.tickInputs === undefined) return passOne;
      const inputsOf = await kind.tickInputs(kube);
      return async (context, owner, listed) =>
        pass(kind, context, owner as Owner, listed, await inputsOf(owner as Owner));
    },
    uses: (referenced, owner, name) =>
      (kind.uses ?? []).some((use) => use.kind === referenced && use.by(owner as Owner, name)),
  };
}

interface PassReport {
  /** Resources looked at. */
  objects: number;
  /** API writes made. */
  writes: number;
  /** Status writes that met a concurrent change (each re-run from a fresh read). */
  conflicts: number;
  /** Resources whose reconcile failed (logged; the next tick tries again). */
  failed: number;
}

/** A tick's totals, and each kind's. */
type TickReport = PassReport & { kinds: Partial<Record<OwnerKind, PassReport>> };

interface ControllerOptions {
  kube: Kube;
  kinds: readonly Registration[];
  heartbeatMs: number;
  log: Logger;
  now?: () => Date;
  /** Resources reconciled at once in a tick, per kind. */
  concurrency?: number;
  /** Passes for one resource before a conflict is left to the next event or tick. */
  attempts?: number;
}

interface Controller {
  /** The kinds registered, each reconciled by tick() and reconcile(). */
  readonly kinds: readonly OwnerKind[];
  /** Level-triggered pass over every resource of every kind (the PingSource tick). */
  tick(): Promise<TickReport>;
  /** One resource (an ApiServerSource event); a deleted one is nothing to do. */
  reconcile(kind: OwnerKind, namespace: string, name: string): Promise<PassReport>;
  /** The resources of `namespace` that use `name` of `kind` (it was created, changed or deleted). */
  reconcileUsers(kind: ReferencedKind, namespace: string, name: string): Promise<PassReport>;
}

interface Engine {
  context: PassContext;
  log: Logger;
  attempts: number;
  concurrency: number;
  /** The pass under way for each resource (`<kind>/<namespace>/<name>`), the next queued on it. */
  running: Map<string, Promise<unknown>>;
}

/**
 * Runs `pass` once the passes already under way for the same resource have ended: events,
 * ticks and round announcements for one resource arrive together, and passes decided side by
 * side would each make the same writes and tell the same events.
 */
async function oneAtATime<T>(engine: Engine, key: string, pass: () => Promise<T>): Promise<T> {
  const before = engine.running.get(key) ?? Promise.resolve();
  const mine = before.then(pass, pass);
  const settled = mine.then(
    () => undefined,
    () => undefined,
  );
  engine.running.set(key, settled);
  try {
    return await mine;
  } finally {
    if (engine.running.get(key) === settled) engine.running.delete(key);
  }
}

/** The key a resource's passes queue on. */
const resourceKey = (kind: Registration, namespace: string, name: string) =>
  `${kind.kind}/${namespace}/${name}`;

const emptyReport = (objects: number): PassReport => ({
  objects,
  writes: 0,
  conflicts: 0,
  failed: 0,
});

/** Passes over one resource from fresh reads until one meets no conflict (or attempts run out). */
async function fresh(
  engine: Engine,
  kind: Registration,
  namespace: string,
  name: string,
  report: PassReport,
): Promise<void> {
  await oneAtATime(engine, resourceKey(kind, namespace, name), () =>
    passes(engine, kind, namespace, name, report),
  );
}

async function passes(
  engine: Engine,
  kind: Registration,
  namespace: string,
  name: string,
  report: PassReport,
): Promise<void> {
  const { kube } = engine.context;
  for (let attempt = 1; attempt <= engine.attempts; attempt += 1) {
    const [owner, services] = await Promise.all([
      findObject(kube, { kind: kind.kind, namespace, name }),
      kube.list('knativeService', { namespace, labelSelector: kind.selector(name) }),
    ]);
    if (owner === undefined) return;
    const listed = new Map(services.items.map((s) => [s.metadata.name, s]));
    const result = await kind.pass(engine.context, owner, listed);
    report.writes += result.writes;
    if (!result.conflict) return;
    report.conflicts += 1;
  }
  engine.log.warn(
    { kind: kind.kind, namespace, name, attempts: engine.attempts },
    'status kept conflicting; left to the next tick',
  );
}

/** The managed Services by their controller's `<namespace>/<kind>/<name>`. */
function byController(services: readonly KubeObject[]): Map<string, Map<string, KubeObject>> {
  const groups = new Map<string, Map<string, KubeObject>>();
  for (const service of services) {
    const ref = service.metadata.ownerReferences?.find((r) => r['controller'] === true);
    if (ref === undefined) continue;
    const key = `${service.metadata.namespace ?? ''}/${String(ref['kind'])}/${String(ref['name'])}`;
    let group = groups.get(key);
    if (group === undefined) groups.set(key, (group = new Map<string, KubeObject>()));
    group.set(service.metadata.name, service);
  }
  return groups;
}

/** One kind's tick: every owner, `concurrency` at a time; a failing one is logged and counted. */
async function tickKind(
  engine: Engine,
  kind: Registration,
  services: Promise<Map<string, Map<string, KubeObject>>>,
): Promise<PassReport> {
  const { kube } = engine.context;
  const [owners, grouped, passOne] = await Promise.all([
    kube.list(kind.kind),
    services,
    kind.tickPass(kube),
  ]);
  const kindName = kubeKinds[kind.kind].kind;
  const report = emptyReport(owners.items.length);
  let unavailable: UnavailableError | undefined;
  await pMap(
    owners.items,
    async (owner) => {
      const { namespace = '', name } = owner.metadata;
      try {
        const listed = grouped.get(`${namespace}/${kindName}/${name}`) ?? new Map();
        const result = await oneAtATime(engine, resourceKey(kind, namespace, name), () =>
          passOne(engine.context, owner, listed),
        );
        report.writes += result.writes;
        if (!result.conflict) return;
        report.conflicts += 1;
        await fresh(engine, kind, namespace, name, report);
      } catch (err) {
        report.failed += 1;
        if (err instanceof UnavailableError) unavailable ??= err;
        engine.log.error(
          { err, kind: kind.kind, namespace, name },
          'reconcile failed; the next tick tries again',
        );
      }
    },
    { concurrency: engine.concurrency },
  );
  // The tick is redelivered (and every resource looked at again) when the API server failed.
  if (unavailable !== undefined) throw unavailable;
  return report;
}

/**
 * Every kind's pass runs whichever fails: a kind the API server refuses must not hold the others
 * up. The first failure is then thrown, so the tick is redelivered.
 */
async function tick(engine: Engine, kinds: readonly Registration[]): Promise<TickReport> {
  const selector = `${managedBy.label}=${managedBy.value}`;
  const services = engine.context.kube
    .list('knativeService', { labelSelector: selector })
    .then((list) => byController(list.items));
  // Handled by each kind's pass; this keeps a rejection from going unhandled meanwhile.
  services.catch(() => undefined);
  const settled = await Promise.allSettled(kinds.map((k) => tickKind(engine, k, services)));
  const total: TickReport = { ...emptyReport(0), kinds: {} };
  settled.forEach((result, i) => {
    if (result.status === 'rejected') return;
    const report = result.value;
    total.kinds[kinds[i]?.kind ?? 'jointInferenceService'] = report;
    total.objects += report.objects;
    total.writes += report.writes;
    total.conflicts += report.conflicts;
    total.failed += report.failed;
  });
  const failed = settled.find((r) => r.status === 'rejected');
  if (failed !== undefined) throw failed.reason;
  return total;
}

async function reconcileUsers(
  engine: Engine,
  kinds: readonly Registration[],
  referenced: ReferencedKind,
  namespace: string,
  name: string,
): Promise<PassReport> {
  const report = emptyReport(0);
  for (const kind of kinds) {
    const { items } = await engine.context.kube.list(kind.kind, { namespace });
    const users = items.filter((item) => kind.uses(referenced, item, name));
    report.objects += users.length;
    for (const user of users) await fresh(engine, kind, namespace, user.metadata.name, report);
  }
  return report;
}

function createController(options: ControllerOptions): Controller {
  const { kube, log, kinds } = options;
  const now = options.now ?? (() => new Date());
  const engine: Engine = {
    context: {
      kube,
      now,
      options: { heartbeatMs: options.heartbeatMs },
      apply: { log, now, component: 'reconcile-tick' },
    },
    log,
    attempts: options.attempts ?? 3,
    concurrency: options.concurrency ?? 16,
    running: new Map(),
  };
  const registered = (kind: OwnerKind): Registration => {
    const found = kinds.find((k) => k.kind === kind);
    if (found === undefined) throw new Error(`kind ${kind} is not registered with the engine`);
    return found;
  };
  return {
    kinds: kinds.map((k) => k.kind),
    tick: () => tick(engine, kinds),
    async reconcile(kind, namespace, name) {
      const report = emptyReport(1);
      await fresh(engine, registered(kind), namespace, name, report);
      return report;
    },
    reconcileUsers: (kind, namespace, name) => reconcileUsers(engine, kinds, kind, namespace, name),
  };
}

export { createController, defineKind };
export type { Controller, ControllerOptions, PassReport, TickReport, ResourceKind, Observed };
export type { Registration, ReferencedKind };
