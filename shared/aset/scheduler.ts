/**
 * The aset-scheduler's decisions, over the shared state of binding-store.ts: binds a stream to a
 * worker (variant x cluster) with the policy in force — placement.ts's decision, the one the
 * simulator makes — and every T lets the deployed meta-policy (aset-controller.ts) choose the
 * policy for the next window from the window that just ended. Side effects (the store, the clock,
 * the random draws, the controller) are passed in.
 */
import { createHash } from 'node:crypto';
import { ConflictError, NotFoundError, ValidationError } from '../errors/index.js';
import type { Delivery } from '../redis/index.js';
import type { BindingRecord, BindingStore, WindowOutcome } from './binding-store.js';
import { violations } from './constraints.js';
import type { WindowController } from './window.js';
import { binOffset } from './observation.js';
import { placeStream } from './placement.js';
import { policies } from './policies.js';
import type { SimulationWindow } from './window.js';
import type { StreamRequest } from './stream-request.js';
import { constraintNames, policyNames } from './types.js';
import type { ConstraintName, PolicyName, Scheduler, Stream, Topology, Worker } from './types.js';

/** Where a stream was bound. */
interface Placement {
  readonly id: string;
  readonly worker: {
    readonly index: number;
    readonly variant: string;
    readonly model: string;
    readonly cluster: string;
  };
  /** Where the client sends its queries, when the deployment says (ASET_ENDPOINT_TEMPLATE). */
  readonly endpoint?: string;
  readonly policy: PolicyName;
  /** 2 (d + 2 sigma) + D_v(zeta): what the policies ranked the binding by. */
  readonly expectedMs: number;
  readonly expiresAt: string;
}

/** Why a stream could not be bound: per constraint, on how many workers it failed. */
interface Rejection {
  readonly id: string;
  readonly policy: PolicyName;
  readonly reasons: Readonly<Record<ConstraintName, number>>;
  readonly message: string;
}

type RequestOutcome =
  | { kind: 'bound'; placement: Placement; replay: boolean }
  | { kind: 'rejected'; rejection: Rejection };

interface SchedulerStatus {
  readonly topology: string;
  readonly policy: PolicyName | undefined;
  readonly windowStart: string | undefined;
  readonly windowSeconds: number;
  readonly controller: string;
  /** The Q-values behind this replica's latest choice, by policy (a network controller only). */
  readonly lastQ: Readonly<Record<string, number>> | undefined;
  readonly bindings: number;
  readonly workers: ReadonlyArray<{
    index: number;
    variant: string;
    cluster: string;
    streams: number;
    load: number;
    capacity: number | null;
  }>;
}

interface AsetScheduler {
  request(request: StreamRequest): Promise<RequestOutcome>;
  find(id: string): Promise<Placement>;
  /** Ends a stream's binding; undefined when it had none (ended already, or never bound). */
  end(id: string): Promise<Placement | undefined>;
  /** The periodic tick: rolls a window that is due and releases expired leases. */
  tick(): Promise<{ policy: PolicyName; swept: number }>;
  report(
    delivery: Omit<Delivery, 'tag'>,
    reports: ReadonlyArray<{ variant: string; cluster: string; responses: number }>,
  ): Promise<boolean>;
  status(): Promise<SchedulerStatus>;
}

interface SchedulerDeps {
  topology: Topology;
  store: BindingStore;
  controller: WindowController & { readonly lastQ?: Float32Array | undefined };
  windowMs: number;
  /** Added to a stream's declared duration before its lease runs out. */
  leaseGraceMs: number;
  now(): number;
  uniform(): number;
  endpointFor?(worker: Worker): string;
  /** Decisions that lost the worker's last capacity to another replica are retried this often. */
  attempts?: number;
  /** Most expired leases one sweep releases. */
  sweepLimit?: number;
  /**
   * Requests also release expired leases, at most this often per replica (default 1 s): the
   * tick comes once a minute, and a lease that ran out holds capacity until it is released.
   */
  sweepEveryMs?: number;
  /** A window's choice failed; the previous policy stays. */
  onChoiceError?(error: unknown): void;
  onDecision?(outcome: 'bound' | 'replay' | 'rejected', policy: PolicyName): void;
  /** This replica rolled a window and stored the policy chosen for the next one. */
  onWindow?(policy: PolicyName): void;
}

const fingerprintOf = (request: StreamRequest): string =>
  createHash('sha256').update(JSON.stringify(request)).digest('hex');

/** The stream a request describes, in the problem model's terms (what placement.ts ranks). */
function streamOf(request: StreamRequest): Stream {
  return {
    id: 0,
    app: request.app ?? 'stream',
    task: request.task,
    maxDelayMs: request.maxDelayMs,
    minAccuracy: request.minAccuracy,
    rate: request.rate,
    size: request.size,
    transmissionMsPerSize: request.transmissionMsPerSize,
    accessDelayMs: request.accessDelayMs,
    durationS: request.durationS,
    scheduler: request.scheduler,
  };
}

/**
 * The window that just rolled, as the controller sees a simulator window: the stored
 * time-averaged features as its one sample (outcomes are not tracked by the scheduler).
 */
function rolledWindow(
  window: Extract<WindowOutcome, { kind: 'rolled' }>,
  policy: PolicyName,
): SimulationWindow {
  return {
    startMs: window.startMs,
    endMs: window.endMs,
    policy,
    success: 0,
    qosFailure: 0,
    rejected: 0,
    samples: [
      {
        timeMs: window.endMs,
        features: window.features,
        success: 0,
        qosFailure: 0,
        rejected: 0,
      },
    ],
  };
}

/** Per constraint, on how many of `workers` the stream fails it. */
function failureCounts(
  stream: Stream,
  scheduler: Scheduler,
  workers: readonly Worker[],
  loadOf: (worker: Worker) => number,
): Record<ConstraintName, number> {
  const reasons = Object.fromEntries(constraintNames.map((c) => [c, 0])) as Record<
    ConstraintName,
    number
  >;
  for (const worker of workers) {
    for (const failed of violations(stream, scheduler, worker, loadOf(worker)))
      reasons[failed] += 1;
  }
  return reasons;
}

/** The topology looked up the ways requests and reports name its parts. */
interface TopologyIndex {
  readonly schedulers: ReadonlyMap<string, Scheduler>;
  /** Workers by `<variant>@<cluster>`, as reports name them. */
  readonly byName: ReadonlyMap<string, Worker>;
  /** Workers by the task they serve: a request's candidates. */
  readonly byTask: ReadonlyMap<string, Worker[]>;
}

function indexTopology(topology: Topology): TopologyIndex {
  const schedulers = new Map<string, Scheduler>(topology.schedulers.map((s) => [s.id, s]));
  const byName = new Map<string, Worker>(
    topology.workers.map((w) => [`${w.variant.id}@${w.cluster.id}`, w]),
  );
  const byTask = new Map<string, Worker[]>();
  for (const worker of topology.workers) {
    const list = byTask.get(worker.model.task) ?? [];
    list.push(worker);
    byTask.set(worker.model.task, list);
  }
  return { schedulers, byName, byTask };
}

/**
 * One replica's scheduler: its dependencies, the topology's indexes, and the little state it
 * keeps itself (when it last swept, the initial choice); everything shared is in the store.
 */
class SchedulerReplica {
  private readonly topology: Topology;
  private readonly store: BindingStore;
  private readonly controller: SchedulerDeps['controller'];
  private readonly index: TopologyIndex;
  private readonly attempts: number;
  private readonly sweepLimit: number;
  private readonly sweepEveryMs: number;
  private lastSweep = -Infinity;
  private initial: Promise<PolicyName> | undefined;

  constructor(private readonly deps: SchedulerDeps) {
    this.topology = deps.topology;
    this.store = deps.store;
    this.controller = deps.controller;
    this.attempts = deps.attempts ?? 5;
    this.sweepLimit = deps.sweepLimit ?? 1_000;
    this.sweepEveryMs = deps.sweepEveryMs ?? 1_000;
    this.index = indexTopology(deps.topology);
  }

  /** Binds a stream with the policy in force, or answers a retry with its binding. */
  async request(request: StreamRequest): Promise<RequestOutcome> {
    const scheduler = this.index.schedulers.get(request.scheduler);
    if (scheduler === undefined) {
      throw new ValidationError(
        `scheduler: '${request.scheduler}' is not in topology ${this.topology.name} (one of ${[...this.index.schedulers.keys()].join(', ')})`,
      );
    }
    const fingerprint = fingerprintOf(request);
    const existing = await this.store.find(request.id);
    if (existing !== undefined) return this.replayOf(existing, fingerprint);
    const now = this.deps.now();
    const policy = await this.policyNow(now);
    if (now - this.lastSweep >= this.sweepEveryMs) await this.sweepAll(now);
    return this.place(request, scheduler, policy, fingerprint, now);
  }

  async find(id: string): Promise<Placement> {
    const record = await this.store.find(id);
    if (record === undefined) throw new NotFoundError(`stream ${id} is not bound`);
    return this.placementOf(record);
  }

  async end(id: string): Promise<Placement | undefined> {
    const record = await this.store.release(id, this.deps.now());
    return record === undefined ? undefined : this.placementOf(record);
  }

  async tick(): Promise<{ policy: PolicyName; swept: number }> {
    const now = this.deps.now();
    const policy = await this.policyNow(now);
    return { policy, swept: await this.sweepAll(now) };
  }

  async report(
    delivery: Omit<Delivery, 'tag'>,
    reports: ReadonlyArray<{ variant: string; cluster: string; responses: number }>,
  ): Promise<boolean> {
    const counts = reports.map(({ variant, cluster, responses }) => {
      const worker = this.index.byName.get(`${variant}@${cluster}`);
      if (worker === undefined) {
        throw new ValidationError(
          `reports: no worker runs variant '${variant}' on cluster '${cluster}' in topology ${this.topology.name}`,
        );
      }
      return { worker: worker.index, responses };
    });
    return this.store.addResponses(delivery, counts);
  }

  async status(): Promise<SchedulerStatus> {
    const snapshot = await this.store.snapshot();
    const controller = this.controller;
    const q = controller.lastQ;
    return {
      topology: this.topology.name,
      policy: snapshot.policy,
      windowStart:
        snapshot.windowStartMs === undefined
          ? undefined
          : new Date(snapshot.windowStartMs).toISOString(),
      windowSeconds: this.deps.windowMs / 1000,
      controller: controller.name,
      lastQ:
        q === undefined
          ? undefined
          : Object.fromEntries(policyNames.map((name, i) => [name, q[i] ?? 0])),
      bindings: snapshot.bindings,
      workers: this.topology.workers.map((w) => ({
        index: w.index,
        variant: w.variant.id,
        cluster: w.cluster.id,
        streams: snapshot.streams[w.index] ?? 0,
        load: snapshot.load[w.index] ?? 0,
        capacity: Number.isFinite(w.capacity) ? w.capacity : null,
      })),
    };
  }

  /**
   * Decides with the loads as read and tries to reserve; a reservation that lost the worker's
   * capacity to another replica decides again, up to `attempts` times.
   */
  private async place(
    request: StreamRequest,
    scheduler: Scheduler,
    policy: PolicyName,
    fingerprint: string,
    now: number,
  ): Promise<RequestOutcome> {
    const stream = streamOf(request);
    const candidates = this.index.byTask.get(request.task) ?? [];
    const position = new Map(candidates.map((w, i) => [w.index, i]));
    let loads: Float64Array = new Float64Array(0);
    const loadOf = (worker: Worker) => {
      const i = position.get(worker.index);
      return i === undefined ? 0 : loads[i]!;
    };
    for (let attempt = 0; attempt < this.attempts; attempt += 1) {
      loads = await this.store.loads(candidates.map((w) => w.index));
      const chosen = placeStream(stream, scheduler, candidates, loadOf, policies[policy], () =>
        this.deps.uniform(),
      );
      if (chosen === undefined) {
        // A twin of this request (a redelivery) may have taken the last capacity since the
        // lookup in request(): its binding and its load are written by one script, so loads that
        // left no room for this stream because of the twin come with the twin's binding.
        const twin = await this.store.find(request.id);
        if (twin !== undefined) return this.replayOf(twin, fingerprint);
        return this.rejection(request, stream, scheduler, loadOf, policy, false);
      }
      const record = this.recordOf(request, stream, chosen, policy, fingerprint, now);
      const outcome = await this.store.reserve(record, chosen.worker.capacity, now);
      if (outcome.kind === 'bound') {
        this.deps.onDecision?.('bound', policy);
        return { kind: 'bound', placement: this.placementOf(record), replay: false };
      }
      if (outcome.kind === 'exists') return this.replayOf(outcome.record, fingerprint);
      if (outcome.kind === 'ended') {
        throw new ConflictError(`stream ${request.id} has ended: a new stream needs a new id`);
      }
    }
    return this.rejection(request, stream, scheduler, loadOf, policy, true);
  }

  /** The binding to store for `request` placed on `chosen`, with its lease. */
  private recordOf(
    request: StreamRequest,
    stream: Stream,
    chosen: { worker: Worker; expectedMs: number },
    policy: PolicyName,
    fingerprint: string,
    now: number,
  ): BindingRecord {
    return {
      id: request.id,
      worker: chosen.worker.index,
      scheduler: request.scheduler,
      policy,
      fingerprint,
      delta: String(stream.size * stream.rate),
      rate: String(stream.rate),
      cell: binOffset(stream.maxDelayMs, stream.rate),
      expectedMs: chosen.expectedMs,
      boundAtMs: now,
      expiresAtMs: now + request.durationS * 1000 + this.deps.leaseGraceMs,
    };
  }

  /** Releases every expired lease (in rounds of `sweepLimit`); says how many. */
  private async sweepAll(now: number): Promise<number> {
    this.lastSweep = now;
    let total = 0;
    for (let round = 0; round < 100; round += 1) {
      const swept = await this.store.sweep(now, this.sweepLimit);
      total += swept;
      if (swept < this.sweepLimit) break;
    }
    return total;
  }

  /**
   * The choice before any window has been observed (the same on every replica). If the controller
   * fails there, the paper's first policy stands in, as in the simulator, and the next call tries
   * the controller again.
   */
  private initialPolicy(): Promise<PolicyName> {
    return (this.initial ??= (async () => this.controller.choose(undefined))().catch(
      (error: unknown) => {
        this.deps.onChoiceError?.(error);
        this.initial = undefined;
        return policyNames[0];
      },
    ));
  }

  /** The controller's choice after `previous`; undefined when it failed (reported). */
  private async choose(previous: SimulationWindow | undefined): Promise<PolicyName | undefined> {
    if (previous === undefined) return this.initialPolicy();
    try {
      return await this.controller.choose(previous);
    } catch (error) {
      this.deps.onChoiceError?.(error);
      return undefined;
    }
  }

  /** The policy in force now, rolling the window first when it is due. */
  private async policyNow(now: number): Promise<PolicyName> {
    const window = await this.store.window(now, this.deps.windowMs);
    if (window.kind === 'current') return window.policy ?? (await this.initialPolicy());
    const previous: SimulationWindow | undefined =
      window.kind === 'started'
        ? undefined
        : rolledWindow(window, window.policy ?? (await this.initialPolicy()));
    const startMs = window.kind === 'started' ? window.startMs : window.endMs;
    await this.sweepAll(now);
    const chosen = await this.choose(previous);
    // A failed choice keeps what was in force: the stored policy was not replaced.
    if (chosen === undefined) return previous?.policy ?? (await this.initialPolicy());
    if (await this.store.setPolicy(startMs, chosen)) this.deps.onWindow?.(chosen);
    return chosen;
  }

  /** What a client is told about a binding. */
  private placementOf(record: BindingRecord): Placement {
    const worker = this.topology.workers[record.worker];
    if (worker === undefined) {
      throw new ConflictError(
        `stream ${record.id} is bound to worker ${record.worker}, which topology ${this.topology.name} no longer has`,
      );
    }
    const endpoint = this.deps.endpointFor?.(worker);
    return {
      id: record.id,
      worker: {
        index: worker.index,
        variant: worker.variant.id,
        model: worker.model.id,
        cluster: worker.cluster.id,
      },
      ...(endpoint === undefined ? {} : { endpoint }),
      policy: record.policy,
      expectedMs: record.expectedMs,
      expiresAt: new Date(record.expiresAtMs).toISOString(),
    };
  }

  /** The answer to a request whose id is already bound: its binding if it is a retry. */
  private replayOf(record: BindingRecord, fingerprint: string): RequestOutcome {
    if (record.fingerprint !== fingerprint) {
      throw new ConflictError(
        `stream ${record.id} is already bound with other requirements: a new stream needs a new id`,
      );
    }
    this.deps.onDecision?.('replay', record.policy);
    return { kind: 'bound', placement: this.placementOf(record), replay: true };
  }

  /** A rejection naming why no worker was admissible, or that contention took them all. */
  private rejection(
    request: StreamRequest,
    stream: Stream,
    scheduler: Scheduler,
    loadOf: (worker: Worker) => number,
    policy: PolicyName,
    contended: boolean,
  ): RequestOutcome {
    const workers = this.topology.workers;
    const reasons = failureCounts(stream, scheduler, workers, loadOf);
    const message = contended
      ? `every admissible worker's capacity was taken by concurrent bindings (${this.attempts} attempts)`
      : `no worker meets the stream's requirements: ${constraintNames
          .filter((c) => reasons[c] > 0)
          .map((c) => `${c} fails on ${reasons[c]} of ${workers.length}`)
          .join(', ')}`;
    this.deps.onDecision?.('rejected', policy);
    return { kind: 'rejected', rejection: { id: request.id, policy, reasons, message } };
  }
}

/** The scheduler of one replica; its methods may be called detached from the object. */
function createAsetScheduler(deps: SchedulerDeps): AsetScheduler {
  const replica = new SchedulerReplica(deps);
  return {
    request: (request) => replica.request(request),
    find: (id) => replica.find(id),
    end: (id) => replica.end(id),
    tick: () => replica.tick(),
    report: (delivery, reports) => replica.report(delivery, reports),
    status: () => replica.status(),
  };
}

export { createAsetScheduler };
export type { AsetScheduler, Placement, Rejection, RequestOutcome, SchedulerStatus };
