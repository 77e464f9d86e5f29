/**
 * A seeded discrete-event simulation of the ASET paper's edge inference system (sections III and
 * V-A), query by query: the environment the static policies are benchmarked on and the DQN agent
 * is trained in.
 *
 * Model, as we read the paper:
 * - A stream arriving at its scheduler is bound by the CURRENT policy to one of the workers that
 *   satisfy constraints (1)-(4) given the reserved loads L_vn (sum of size * rate of the streams
 *   bound to the worker); its size * rate stays reserved until the stream's duration is over. A
 *   stream with no feasible worker is rejected: each of its queries counts as rejected at the time
 *   it would have been sent.
 * - A bound stream sends a query every 1 / rate s, the first at its arrival. The query reaches
 *   the worker after delta_i + a link draw N(d, sigma) + b_i * zeta_i, waits in the worker's FIFO
 *   queue, is processed in a batch, and its response comes back after delta_i + another link draw.
 *   End-to-end latency <= D^i is a success, anything later a QoS failure. Network and processing
 *   draws are normals clamped at 0.
 * - A worker's `replicas` are parallel servers sharing one FIFO queue (the paper's replicas are
 *   separate containers behind one worker): a free server takes up to batchSize queued queries and
 *   holds them for one draw of N(D_v(largest size in the batch), deviation).
 * - Memory stays bounded when a worker is overloaded: a server about to take a query that has
 *   already waited longer than D^i since it was sent drops it instead (it could only be late) and
 *   counts it as a QoS failure at that moment. Dropped queries cost no service time, so an
 *   overloaded queue holds at most about D^i worth of arrivals.
 * - Outcomes count when the response reaches the client (or the query is dropped, or, rejected,
 *   would have been sent). Queries still in flight when a run stops are counted nowhere.
 *
 * Randomness comes from independent seeded streams (workload per access point, network, network
 * tails, processing, policy), so runs on one seed see the same workload whatever the policy.
 *
 * A simulation can be forked (`Simulation.fork`): the copy stands at the same time in exactly the
 * same state, every random stream included, so the two run bit-identically under the same calls
 * and independently of each other. The hindsight oracle (oracle.ts) tries its candidates on forks.
 *
 * The hot path allocates nothing per query: streams, queries, queues and batches live in typed
 * arrays indexed by slot, and events are int32 payloads in `EventQueue`.
 */
import { SeededRandom } from '../../../shared/random/index.js';
import { EventQueue } from './event-queue.js';
import { ObservationRecorder } from '../../../shared/aset/observation.js';
import type { Observation } from '../../../shared/aset/observation.js';
import { placeStream } from '../../../shared/aset/placement.js';
import { policies as staticPolicies } from '../../../shared/aset/policies.js';
import type { AppSpec } from '../../../shared/aset/scenario.js';
import { sourceFor } from './arrival-source.js';
import type { ArrivalSource } from './arrival-source.js';
import { OutcomeLedger } from './simulation-outcomes.js';
import type { Totals } from './simulation-outcomes.js';
import type { Outcomes, SimulationWindow } from '../../../shared/aset/window.js';
import { QueryTable, StreamTable } from './simulation-tables.js';
import { LinkTable, WorkerPool } from './simulation-topology.js';
import type { Policy, PolicyName, Stream, Topology, Worker } from '../../../shared/aset/types.js';
import { deriveSeed, queriesOf } from './workload.js';
import type { LambdaSchedule, StreamArrival } from './workload.js';

/** Where streams come from: Table I at lambda (evaluation), or a fixed list (tests, replays). */
interface SimulationOptions {
  readonly topology: Topology;
  readonly seed: number;
  /** Table I apps: with `lambda`, generate the paper's workload. */
  readonly apps?: readonly AppSpec[];
  readonly lambda?: LambdaSchedule;
  /** Factor on Table I durations; default `durationScaleFor(apps)` (~1,000 q/s per AP at 60). */
  readonly durationScale?: number;
  /** Instead of apps/lambda: exactly these arrivals (sorted by `atMs`). */
  readonly arrivals?: readonly StreamArrival[];
  /** Period of the observation samples (eq. 11), ms; default 1,000 (the paper's T is in seconds). */
  readonly sampleEveryMs?: number;
  /** Policy for streams arriving before the first `setPolicy`; default the paper's first. */
  readonly policy?: PolicyName;
  /** Replaces the policy implementations (tests); default those of policies.ts. */
  readonly policies?: Readonly<Record<PolicyName, Policy>>;
}

interface Simulation {
  /** Policy for streams arriving from now on (the ASET agent's action). */
  setPolicy(name: PolicyName): void;
  readonly policy: PolicyName;
  /** Processes every event up to and including `ms`, then stands at `ms`. */
  runUntil(ms: number): void;
  now(): number;
  totals(): Totals;
  /** Outcomes and samples since the previous call (or the start). */
  takeWindow(): SimulationWindow;
  /**
   * An independent simulation standing at the same time in exactly the same state: clock, pending
   * events, streams, queries, queues, counts, the window so far, the policy in force and every
   * random stream. Driven by the same calls, the two give bit-identical results, and driving one
   * never affects the other. Costs a copy of the state (no replay). The policy implementations
   * (`SimulationOptions.policies`) are shared, so they must keep no state (those of policies.ts
   * keep none: their randomness comes from the simulation's policy stream, which is copied).
   */
  fork(): Simulation;
}

/** Event kinds, in the low KIND_BITS of an event's payload; the rest is the subject's slot. */
const ARRIVAL = 0;
const BATCH_DONE = 1;
const DELIVERY = 2;
const STREAM_END = 3;
const KIND_BITS = 2;
const KIND_MASK = 3;

/** Everything a run carries from one instant to the next: what a fork copies. */
interface EngineState {
  readonly policyName: PolicyName;
  readonly source: ArrivalSource;
  readonly networkRandom: SeededRandom;
  readonly networkSpikeRandom: SeededRandom;
  readonly processingRandom: SeededRandom;
  readonly policyRandom: SeededRandom;
  readonly links: LinkTable;
  readonly pool: WorkerPool;
  readonly streams: StreamTable;
  readonly queries: QueryTable;
  readonly ledger: OutcomeLedger;
  readonly recorder: ObservationRecorder;
  readonly events: EventQueue;
  readonly now: number;
  readonly sampleIndex: number;
  readonly nextSampleMs: number;
  readonly windowStart: number;
  readonly windowSamples: Observation[];
}

/** A run's state at time 0: nothing bound, nothing pending, every random stream at its seed. */
function initialState(options: SimulationOptions, sampleEveryMs: number): EngineState {
  const seeded = (label: string) => new SeededRandom(deriveSeed(options.seed, label));
  return {
    policyName: options.policy ?? 'closest',
    source: sourceFor(options),
    networkRandom: seeded('network'),
    networkSpikeRandom: seeded('network-spikes'),
    processingRandom: seeded('processing'),
    policyRandom: seeded('policy'),
    links: new LinkTable(options.topology),
    pool: new WorkerPool(options.topology.workers),
    streams: new StreamTable(),
    queries: new QueryTable(),
    ledger: new OutcomeLedger(),
    recorder: new ObservationRecorder(options.topology.workers.length),
    events: new EventQueue(),
    now: 0,
    sampleIndex: 1,
    nextSampleMs: sampleEveryMs,
    windowStart: 0,
    windowSamples: [],
  };
}

/**
 * One run: its clock, random streams, tables and counts as explicit fields, and a named handler
 * per event kind. Each handler reads the tables (simulation-tables.ts, simulation-topology.ts) by
 * slot, counts outcomes in the ledger (simulation-outcomes.ts) and schedules what follows.
 */
class SimulationEngine {
  private readonly topology: Topology;
  private readonly sampleEveryMs: number;
  private readonly policyTable: Readonly<Record<PolicyName, Policy>>;
  policyName: PolicyName;
  private policy: Policy;
  private readonly source: ArrivalSource;
  private readonly networkRandom: SeededRandom;
  private readonly networkNormal: () => number;
  /** Uniforms for spiky hops only (a stream of its own: links without spikes draw as before). */
  private readonly networkSpikeRandom: SeededRandom;
  private readonly networkSpike: () => number;
  private readonly processingRandom: SeededRandom;
  private readonly processingNormal: () => number;
  private readonly policyRandom: SeededRandom;
  private readonly policyUniform: () => number;
  /** Immutable once built: a fork shares it. */
  private readonly links: LinkTable;
  private readonly pool: WorkerPool;
  private readonly streams: StreamTable;
  private readonly queries: QueryTable;
  private readonly ledger: OutcomeLedger;
  private readonly recorder: ObservationRecorder;
  private readonly loadOf: (worker: Worker) => number;
  private readonly events: EventQueue;
  now: number;
  private sampleIndex: number;
  private nextSampleMs: number;
  private windowStart: number;
  private windowSamples: Observation[];

  /**
   * Checks the options and topology (throwing RangeError) and stands the run at time 0; or, given
   * `state` (see `fork`), in that state.
   */
  constructor(
    private readonly options: SimulationOptions,
    state?: EngineState,
  ) {
    const { topology } = options;
    this.topology = topology;
    topology.workers.forEach((worker, i) => {
      if (worker.index !== i)
        throw new RangeError(`worker at position ${i} has index ${worker.index}`);
    });
    this.sampleEveryMs = options.sampleEveryMs ?? 1000;
    if (!(this.sampleEveryMs > 0)) throw new RangeError('sampleEveryMs must be positive');
    this.policyTable = options.policies ?? staticPolicies;
    const s = state ?? initialState(options, this.sampleEveryMs);
    this.policyName = s.policyName;
    this.policy = this.policyTable[this.policyName];

    this.source = s.source;
    this.networkRandom = s.networkRandom;
    this.networkNormal = s.networkRandom.normal;
    this.networkSpikeRandom = s.networkSpikeRandom;
    this.networkSpike = s.networkSpikeRandom.next;
    this.processingRandom = s.processingRandom;
    this.processingNormal = s.processingRandom.normal;
    this.policyRandom = s.policyRandom;
    this.policyUniform = s.policyRandom.next;

    this.links = s.links;
    this.pool = s.pool;
    this.streams = s.streams;
    this.queries = s.queries;
    this.ledger = s.ledger;
    const recorder = s.recorder;
    this.recorder = recorder;
    this.loadOf = (worker: Worker): number => recorder.load(worker.index);
    this.events = s.events;
    this.now = s.now;
    this.sampleIndex = s.sampleIndex;
    this.nextSampleMs = s.nextSampleMs;
    this.windowStart = s.windowStart;
    this.windowSamples = s.windowSamples;
  }

  /**
   * An independent engine in exactly this one's state (see `Simulation.fork`): every table,
   * counter and random stream copied; only the link table, never written, is shared.
   */
  fork(): SimulationEngine {
    return new SimulationEngine(this.options, {
      policyName: this.policyName,
      source: this.source.fork(),
      networkRandom: this.networkRandom.clone(),
      networkSpikeRandom: this.networkSpikeRandom.clone(),
      processingRandom: this.processingRandom.clone(),
      policyRandom: this.policyRandom.clone(),
      links: this.links,
      pool: this.pool.clone(),
      streams: this.streams.clone(),
      queries: this.queries.clone(),
      ledger: this.ledger.clone(),
      recorder: this.recorder.clone(),
      events: this.events.clone(),
      now: this.now,
      sampleIndex: this.sampleIndex,
      nextSampleMs: this.nextSampleMs,
      windowStart: this.windowStart,
      windowSamples: this.windowSamples.map((o) => ({ ...o, features: o.features.slice() })),
    });
  }

  /** The policy for streams arriving from now on. */
  setPolicy(name: PolicyName): void {
    const next = this.policyTable[name];
    if (next === undefined) throw new RangeError(`unknown policy ${String(name)}`);
    this.policyName = name;
    this.policy = next;
  }

  /** Processes every event up to and including `ms`, then stands at `ms`. */
  runUntil(ms: number): void {
    if (ms < this.now) throw new RangeError(`cannot run back to ${ms} ms from ${this.now} ms`);
    let stepped = true;
    while (stepped) stepped = this.step(ms);
    this.now = ms;
    this.ledger.flushRejected(ms);
  }

  /** The run's counts so far. */
  totals(): Totals {
    return this.ledger.totals(this.queries.inFlight);
  }

  /** Outcomes and samples since the previous call, under the policy in force. */
  takeWindow(): SimulationWindow {
    const taken: SimulationWindow = {
      startMs: this.windowStart,
      endMs: this.now,
      policy: this.policyName,
      ...this.ledger.takeWindow(),
      samples: this.windowSamples,
    };
    this.windowStart = this.now;
    this.windowSamples = [];
    return taken;
  }

  /**
   * Moves to the earliest of the next event, stream arrival and sample (in that order on a tie)
   * and processes it, unless it comes after `ms`; says whether it did.
   */
  private step(ms: number): boolean {
    const tEvent = this.events.peekTime();
    const tStream = this.source.peekMs();
    if (tEvent <= tStream && tEvent <= this.nextSampleMs) {
      if (tEvent > ms) return false;
      this.now = tEvent;
      this.onEvent(this.events.pop());
    } else if (tStream <= this.nextSampleMs) {
      if (tStream > ms) return false;
      this.now = tStream;
      this.onStream(this.source.next());
    } else {
      if (this.nextSampleMs > ms) return false;
      this.now = this.nextSampleMs;
      this.sample(this.now);
      this.sampleIndex += 1;
      this.nextSampleMs = this.sampleIndex * this.sampleEveryMs;
    }
    return true;
  }

  /** Unpacks an event's kind and subject and hands it to its handler. */
  private onEvent(payload: number): void {
    const id = payload >>> KIND_BITS;
    switch (payload & KIND_MASK) {
      case ARRIVAL:
        this.onArrival(id);
        break;
      case BATCH_DONE:
        this.onBatchDone(id);
        break;
      case DELIVERY:
        this.onDelivery(id);
        break;
      default:
        this.onStreamEnd(id);
    }
  }

  /** A stream arrives at its scheduler: bound by the policy in force, or rejected. */
  private onStream({ stream }: StreamArrival): void {
    const scheduler = this.links.schedulerIndex.get(stream.scheduler);
    if (scheduler === undefined) throw new RangeError(`unknown scheduler ${stream.scheduler}`);
    const app = this.ledger.appOf(stream.app);
    const queries = queriesOf(stream);
    this.ledger.arrived(queries);
    const chosen = placeStream(
      stream,
      this.topology.schedulers[scheduler]!,
      this.topology.workers,
      this.loadOf,
      this.policy,
      this.policyUniform,
    );
    if (chosen === undefined) {
      this.ledger.rejectStream(this.now, 1000 / stream.rate, queries, app);
      return;
    }
    this.ledger.bound();
    this.bind(stream, scheduler, chosen.worker.index, app);
  }

  /** Reserves the stream's load on `worker` until its end and sends its first query. */
  private bind(stream: Stream, scheduler: number, worker: number, app: number): void {
    const s = this.streams.add(stream, scheduler, worker, app, this.now);
    this.recorder.bind(worker, stream.maxDelayMs, stream.rate, stream.size);
    this.events.push(this.now + stream.durationS * 1000, (s << KIND_BITS) | STREAM_END);
    this.emitQuery(s, this.now);
  }

  /**
   * A non-negative draw of stream `s`'s link delay; what it exceeds the link's budget by is added
   * to the query's `networkExcess` (the QoS verdict's cause).
   */
  private linkDraw(s: number, slot: number): number {
    const scheduler = this.streams.scheduler[s]!;
    const worker = this.streams.worker[s]!;
    const delay = this.links.draw(scheduler, worker, this.networkNormal, this.networkSpike);
    this.queries.networkExcess[slot]! += delay - this.links.budget(scheduler, worker);
    return delay;
  }

  /**
   * Schedules the arrival at its worker of stream `s`'s next query. Called when the previous
   * query arrives, so a stream has one pending emission at a time; an arrival that network
   * jitter would put before `notBefore` (the previous query's arrival, several deviations
   * earlier than its own send + delay) is held to it, keeping each stream's queries in order.
   */
  private emitQuery(s: number, notBefore: number): void {
    const streams = this.streams;
    const k = streams.emitted[s]!;
    streams.emitted[s] = k + 1;
    const sent = streams.start[s]! + k * streams.period[s]!;
    const slot = this.queries.open(s, sent);
    const arrival = sent + streams.upFixed[s]! + this.linkDraw(s, slot);
    this.events.push(arrival > notBefore ? arrival : notBefore, (slot << KIND_BITS) | ARRIVAL);
  }

  /** A query reaches its worker: the stream's next one is scheduled, this one queued. */
  private onArrival(slot: number): void {
    const s = this.queries.stream[slot]!;
    if (this.streams.emitted[s]! < this.streams.queries[s]!) this.emitQuery(s, this.now);
    const w = this.streams.worker[s]!;
    this.pool.enqueue(w, slot);
    if (this.pool.freeCount[w]! > 0) this.dispatch(w);
  }

  /** Hands queued queries to free servers, a batch each, dropping those already past D^i. */
  private dispatch(w: number): void {
    const { pool, queries, streams, now } = this;
    const limit = pool.batchSize[w]!;
    while (pool.freeCount[w]! > 0 && pool.queueLength[w]! > 0) {
      const g = pool.nextFree(w);
      const base = pool.memberBase[g]!;
      let taken = 0;
      let largest = 0;
      while (taken < limit && pool.queueLength[w]! > 0) {
        const slot = pool.dequeue(w);
        const s = queries.stream[slot]!;
        if (now - queries.sent[slot]! > streams.maxDelay[s]!) {
          this.ledger.qosFailure(streams.app[s]!, queries.networkExcess[slot]! > 0);
          queries.close(slot);
          continue;
        }
        pool.batchMembers[base + taken] = slot;
        taken += 1;
        const size = streams.size[s]!;
        if (size > largest) largest = size;
      }
      if (taken === 0) return;
      pool.occupy(w, g, taken);
      const delay =
        pool.fixedMs[w]! +
        pool.perSizeMs[w]! * largest +
        pool.deviationMs[w]! * this.processingNormal();
      this.events.push(now + (delay > 0 ? delay : 0), (g << KIND_BITS) | BATCH_DONE);
    }
  }

  /** Server `g` finished a batch: its responses head back and it takes the next batch. */
  private onBatchDone(g: number): void {
    const { pool, queries, streams } = this;
    const base = pool.memberBase[g]!;
    for (let i = 0; i < pool.batchLength[g]!; i += 1) {
      const slot = pool.batchMembers[base + i]!;
      const s = queries.stream[slot]!;
      this.events.push(
        this.now + streams.access[s]! + this.linkDraw(s, slot),
        (slot << KIND_BITS) | DELIVERY,
      );
    }
    this.dispatch(pool.vacate(g));
  }

  /** A response reaches its client: a success within D^i, else a QoS failure. */
  private onDelivery(slot: number): void {
    const { queries, streams } = this;
    const s = queries.stream[slot]!;
    // The same relative slack as the constraints: a latency equal to D^i on paper is a success.
    if (this.now - queries.sent[slot]! <= streams.maxDelay[s]! * (1 + 1e-9)) {
      this.ledger.success(streams.app[s]!);
    } else {
      this.ledger.qosFailure(streams.app[s]!, this.queries.networkExcess[slot]! > 0);
    }
    this.recorder.respond(streams.worker[s]!);
    queries.close(slot);
  }

  /** Stream `s`'s duration is over: its reserved load is released. */
  private onStreamEnd(s: number): void {
    const streams = this.streams;
    this.recorder.release(
      streams.worker[s]!,
      streams.maxDelay[s]!,
      streams.rate[s]!,
      streams.size[s]!,
    );
  }

  /** Takes the observation sample due at `t` (eq. 11), with the period's outcomes. */
  private sample(t: number): void {
    this.ledger.flushRejected(t);
    this.windowSamples.push(this.recorder.sample(t, this.sampleEveryMs, this.ledger.takePeriod()));
  }
}

/**
 * Builds a simulation standing at time 0. The RL loop calls `runUntil(t + T)`, `takeWindow()`,
 * then `setPolicy(next)`; a static benchmark sets one policy and runs (see `runStatic`).
 */
function createSimulation(options: SimulationOptions): Simulation {
  return wrap(new SimulationEngine(options));
}

/** The `Simulation` face of an engine. */
function wrap(engine: SimulationEngine): Simulation {
  // Functions rather than the engine itself, so a caller can pass them around unbound.
  return {
    setPolicy: (name: PolicyName) => engine.setPolicy(name),
    get policy() {
      return engine.policyName;
    },
    runUntil: (ms: number) => engine.runUntil(ms),
    now: () => engine.now,
    totals: () => engine.totals(),
    takeWindow: () => engine.takeWindow(),
    fork: () => wrap(engine.fork()),
  };
}

/** One window's outcomes in a static run (samples left out to keep long series small). */
interface WindowOutcomes extends Outcomes {
  readonly startMs: number;
  readonly endMs: number;
}

interface StaticRun {
  readonly totals: Totals;
  readonly windows: readonly WindowOutcomes[];
}

/**
 * A static-policy baseline: `policy` for the whole run of `durationMs`, outcomes per window of
 * `windowMs` (the paper's T = 25 s by default) for the time series plots.
 */
function runStatic(
  options: SimulationOptions,
  policy: PolicyName,
  durationMs: number,
  windowMs = 25_000,
): StaticRun {
  const simulation = createSimulation({ ...options, policy });
  const windows: WindowOutcomes[] = [];
  for (let end = Math.min(windowMs, durationMs); ; end = Math.min(end + windowMs, durationMs)) {
    simulation.runUntil(end);
    const { samples: _samples, policy: _policy, ...outcomes } = simulation.takeWindow();
    windows.push(outcomes);
    if (end >= durationMs) break;
  }
  return { totals: simulation.totals(), windows };
}

export { createSimulation, runStatic };
export type { SimulationOptions, Totals, Simulation, WindowOutcomes, StaticRun, ArrivalSource };
