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
import type { BindingRecord, BindingStore } from './binding-store.js';
import { violations } from './constraints.js';
import type { WindowController } from './episode.js';
import { binOffset } from './observation.js';
import { placeStream } from './placement.js';
import { policies } from './policies.js';
import type { SimulationWindow } from './simulator.js';
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

function createAsetScheduler(deps: SchedulerDeps): AsetScheduler {
  const { topology, store, controller } = deps;
  const attempts = deps.attempts ?? 5;
  const sweepLimit = deps.sweepLimit ?? 1_000;
  const sweepEveryMs = deps.sweepEveryMs ?? 1_000;
  let lastSweep = -Infinity;
  /** Releases every expired lease (in rounds of `sweepLimit`); says how many. */
  async function sweepAll(now: number): Promise<number> {
    lastSweep = now;
    let total = 0;
    for (let round = 0; round < 100; round += 1) {
      const swept = await store.sweep(now, sweepLimit);
      total += swept;
      if (swept < sweepLimit) break;
    }
    return total;
  }
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
  let initial: Promise<PolicyName> | undefined;
  /**
   * The choice before any window has been observed (the same on every replica). If the controller
   * fails there, the paper's first policy stands in, as in the simulator, and the next call tries
   * the controller again.
   */
  const initialPolicy = () =>
    (initial ??= (async () => controller.choose(undefined))().catch((error: unknown) => {
      deps.onChoiceError?.(error);
      initial = undefined;
      return policyNames[0];
    }));

  async function choose(previous: SimulationWindow | undefined): Promise<PolicyName | undefined> {
    if (previous === undefined) return initialPolicy();
    try {
      return await controller.choose(previous);
    } catch (error) {
      deps.onChoiceError?.(error);
      return undefined;
    }
  }

  /** The policy in force now, rolling the window first when it is due. */
  async function policyNow(now: number): Promise<PolicyName> {
    const window = await store.window(now, deps.windowMs);
    if (window.kind === 'current') return window.policy ?? (await initialPolicy());
    const previous: SimulationWindow | undefined =
      window.kind === 'started'
        ? undefined
        : {
            startMs: window.startMs,
            endMs: window.endMs,
            policy: window.policy ?? (await initialPolicy()),
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
    const startMs = window.kind === 'started' ? window.startMs : window.endMs;
    await sweepAll(now);
    const chosen = await choose(previous);
    // A failed choice keeps what was in force: the stored policy was not replaced.
    if (chosen === undefined) return previous?.policy ?? (await initialPolicy());
    if (await store.setPolicy(startMs, chosen)) deps.onWindow?.(chosen);
    return chosen;
  }

  function placementOf(record: BindingRecord): Placement {
    const worker = topology.workers[record.worker];
    if (worker === undefined) {
      throw new ConflictError(
        `stream ${record.id} is bound to worker ${record.worker}, which topology ${topology.name} no longer has`,
      );
    }
    const endpoint = deps.endpointFor?.(worker);
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

  function replayOf(record: BindingRecord, fingerprint: string): RequestOutcome {
    if (record.fingerprint !== fingerprint) {
      throw new ConflictError(
        `stream ${record.id} is already bound with other requirements: a new stream needs a new id`,
      );
    }
    deps.onDecision?.('replay', record.policy);
    return { kind: 'bound', placement: placementOf(record), replay: true };
  }

  function rejection(
    request: StreamRequest,
    stream: Stream,
    scheduler: Scheduler,
    loadOf: (worker: Worker) => number,
    policy: PolicyName,
    contended: boolean,
  ): RequestOutcome {
    const reasons = Object.fromEntries(constraintNames.map((c) => [c, 0])) as Record<
      ConstraintName,
      number
    >;
    for (const worker of topology.workers) {
      for (const failed of violations(stream, scheduler, worker, loadOf(worker)))
        reasons[failed] += 1;
    }
    const message = contended
      ? `every admissible worker's capacity was taken by concurrent bindings (${attempts} attempts)`
      : `no worker meets the stream's requirements: ${constraintNames
          .filter((c) => reasons[c] > 0)
          .map((c) => `${c} fails on ${reasons[c]} of ${topology.workers.length}`)
          .join(', ')}`;
    deps.onDecision?.('rejected', policy);
    return { kind: 'rejected', rejection: { id: request.id, policy, reasons, message } };
  }

  return {
    async request(request) {
      const scheduler = schedulers.get(request.scheduler);
      if (scheduler === undefined) {
        throw new ValidationError(
          `scheduler: '${request.scheduler}' is not in topology ${topology.name} (one of ${[...schedulers.keys()].join(', ')})`,
        );
      }
      const fingerprint = fingerprintOf(request);
      const existing = await store.find(request.id);
      if (existing !== undefined) return replayOf(existing, fingerprint);
      const now = deps.now();
      const policy = await policyNow(now);
      if (now - lastSweep >= sweepEveryMs) await sweepAll(now);
      const stream: Stream = {
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
      const candidates = byTask.get(request.task) ?? [];
      const position = new Map(candidates.map((w, i) => [w.index, i]));
      let loads: Float64Array = new Float64Array(0);
      const loadOf = (worker: Worker) => {
        const i = position.get(worker.index);
        return i === undefined ? 0 : loads[i]!;
      };
      for (let attempt = 0; attempt < attempts; attempt += 1) {
        loads = await store.loads(candidates.map((w) => w.index));
        const chosen = placeStream(stream, scheduler, candidates, loadOf, policies[policy], () =>
          deps.uniform(),
        );
        if (chosen === undefined)
          return rejection(request, stream, scheduler, loadOf, policy, false);
        const record: BindingRecord = {
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
          expiresAtMs: now + request.durationS * 1000 + deps.leaseGraceMs,
        };
        const outcome = await store.reserve(record, chosen.worker.capacity, now);
        if (outcome.kind === 'bound') {
          deps.onDecision?.('bound', policy);
          return { kind: 'bound', placement: placementOf(record), replay: false };
        }
        if (outcome.kind === 'exists') return replayOf(outcome.record, fingerprint);
        if (outcome.kind === 'ended') {
          throw new ConflictError(`stream ${request.id} has ended: a new stream needs a new id`);
        }
      }
      return rejection(request, stream, scheduler, loadOf, policy, true);
    },

    async find(id) {
      const record = await store.find(id);
      if (record === undefined) throw new NotFoundError(`stream ${id} is not bound`);
      return placementOf(record);
    },

    async end(id) {
      const record = await store.release(id, deps.now());
      return record === undefined ? undefined : placementOf(record);
    },

    async tick() {
      const now = deps.now();
      const policy = await policyNow(now);
      return { policy, swept: await sweepAll(now) };
    },

    async report(delivery, reports) {
      const counts = reports.map(({ variant, cluster, responses }) => {
        const worker = byName.get(`${variant}@${cluster}`);
        if (worker === undefined) {
          throw new ValidationError(
            `reports: no worker runs variant '${variant}' on cluster '${cluster}' in topology ${topology.name}`,
          );
        }
        return { worker: worker.index, responses };
      });
      return store.addResponses(delivery, counts);
    },

    async status() {
      const snapshot = await store.snapshot();
      const q = controller.lastQ;
      return {
        topology: topology.name,
        policy: snapshot.policy,
        windowStart:
          snapshot.windowStartMs === undefined
            ? undefined
            : new Date(snapshot.windowStartMs).toISOString(),
        windowSeconds: deps.windowMs / 1000,
        controller: controller.name,
        lastQ:
          q === undefined
            ? undefined
            : Object.fromEntries(policyNames.map((name, i) => [name, q[i] ?? 0])),
        bindings: snapshot.bindings,
        workers: topology.workers.map((w) => ({
          index: w.index,
          variant: w.variant.id,
          cluster: w.cluster.id,
          streams: snapshot.streams[w.index] ?? 0,
          load: snapshot.load[w.index] ?? 0,
          capacity: Number.isFinite(w.capacity) ? w.capacity : null,
        })),
      };
    },
  };
}

export { createAsetScheduler };
export type { AsetScheduler, Placement, Rejection, RequestOutcome, SchedulerStatus };
