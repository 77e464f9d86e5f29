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
 * Randomness comes from four independent seeded streams (workload per access point, network,
 * processing, policy), so runs on one seed see the same workload whatever the policy.
 *
 * The hot path allocates nothing per query: streams, queries, queues and batches live in typed
 * arrays indexed by slot, and events are int32 payloads in `EventQueue`.
 */
import { normal, seededRandom } from '../random/index.js';
import { EventQueue } from './event-queue.js';
import { ObservationRecorder } from './observation.js';
import type { Observation } from './observation.js';
import { placeStream } from './placement.js';
import { policies as staticPolicies } from './policies.js';
import { durationScaleFor } from './scenario.js';
import type { AppSpec } from './scenario.js';
import type { Policy, PolicyName, Scheduler, Stream, Topology, Worker } from './types.js';
import { Workload, deriveSeed, queriesOf } from './workload.js';
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

/** Query counts by outcome. */
interface Outcomes {
  success: number;
  qosFailure: number;
  rejected: number;
}

interface Totals extends Outcomes {
  /** Per Table I app (by name), in order of first arrival. */
  readonly perApp: Readonly<Record<string, Outcomes>>;
  /** Streams that arrived, were bound, were rejected. */
  readonly streams: { readonly arrived: number; readonly bound: number; readonly rejected: number };
  /** Queries of arrived streams: sum of their query counts, whether sent yet or not. */
  readonly queriesOffered: number;
  /** Queries sent to a worker and not yet resolved. */
  readonly inFlight: number;
}

/** What happened between two `takeWindow` calls. */
interface SimulationWindow extends Outcomes {
  readonly startMs: number;
  readonly endMs: number;
  /** The policy in force when the window was taken (the one chosen for it, in a controlled run). */
  readonly policy: PolicyName;
  /** Samples taken in (startMs, endMs], oldest first. */
  readonly samples: readonly Observation[];
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
}

const ARRIVAL = 0;
const BATCH_DONE = 1;
const DELIVERY = 2;
const STREAM_END = 3;
const KIND_BITS = 2;
const KIND_MASK = 3;

/** A Float64Array at least `size` long holding `array`'s values. */
function grownF64(array: Float64Array<ArrayBuffer>, size: number): Float64Array<ArrayBuffer> {
  if (array.length >= size) return array;
  const next = new Float64Array(Math.max(size, array.length * 2));
  next.set(array);
  return next;
}

function grownI32(array: Int32Array<ArrayBuffer>, size: number): Int32Array<ArrayBuffer> {
  if (array.length >= size) return array;
  const next = new Int32Array(Math.max(size, array.length * 2));
  next.set(array);
  return next;
}

/** Ordered stream source: the generated workload or a fixed list. */
interface ArrivalSource {
  peekMs(): number;
  next(): StreamArrival;
}

function listSource(arrivals: readonly StreamArrival[]): ArrivalSource {
  let i = 0;
  return {
    peekMs: () => arrivals[i]?.atMs ?? Infinity,
    next: () => {
      const arrival = arrivals[i];
      if (arrival === undefined) throw new RangeError('no further arrivals');
      i += 1;
      return arrival;
    },
  };
}

function sourceFor(options: SimulationOptions): ArrivalSource {
  if (options.arrivals !== undefined) {
    for (let i = 1; i < options.arrivals.length; i += 1) {
      if (options.arrivals[i]!.atMs < options.arrivals[i - 1]!.atMs) {
        throw new RangeError('arrivals must be sorted by atMs');
      }
    }
    return listSource(options.arrivals);
  }
  if (options.apps === undefined || options.lambda === undefined) {
    throw new RangeError('a simulation needs either arrivals, or apps and lambda');
  }
  return new Workload({
    apps: options.apps,
    schedulers: options.topology.schedulers.map((s) => s.id),
    lambda: options.lambda,
    durationScale: options.durationScale ?? durationScaleFor(options.apps),
    seed: options.seed,
  });
}

/**
 * Builds a simulation standing at time 0. The RL loop calls `runUntil(t + T)`, `takeWindow()`,
 * then `setPolicy(next)`; a static benchmark sets one policy and runs (see `runStatic`).
 */
function createSimulation(options: SimulationOptions): Simulation {
  const { topology } = options;
  const workers = topology.workers;
  const W = workers.length;
  workers.forEach((worker, i) => {
    if (worker.index !== i)
      throw new RangeError(`worker at position ${i} has index ${worker.index}`);
  });
  const sampleEveryMs = options.sampleEveryMs ?? 1000;
  if (!(sampleEveryMs > 0)) throw new RangeError('sampleEveryMs must be positive');
  const policyTable = options.policies ?? staticPolicies;
  let policyName: PolicyName = options.policy ?? 'closest';
  let policy: Policy = policyTable[policyName];

  const source = sourceFor(options);
  const networkNormal = normal(seededRandom(deriveSeed(options.seed, 'network')));
  const processingNormal = normal(seededRandom(deriveSeed(options.seed, 'processing')));
  const policyUniform = seededRandom(deriveSeed(options.seed, 'policy'));

  const schedulerIndex = new Map<string, number>();
  topology.schedulers.forEach((s, i) => schedulerIndex.set(s.id, i));
  // d and sigma per (scheduler, worker), so a query's draw reads two numbers.
  const linkDelay = new Float64Array(topology.schedulers.length * W);
  const linkDeviation = new Float64Array(topology.schedulers.length * W);
  topology.schedulers.forEach((scheduler: Scheduler, s) => {
    for (const worker of workers) {
      const link = scheduler.links[worker.cluster.id];
      if (link === undefined) {
        throw new RangeError(`scheduler ${scheduler.id} has no link to ${worker.cluster.id}`);
      }
      linkDelay[s * W + worker.index] = link.delayMs;
      linkDeviation[s * W + worker.index] = link.deviationMs;
    }
  });

  // Workers: profile, FIFO ring buffer of query slots, free servers, batch slots.
  const batchSize = new Int32Array(W);
  const fixedMs = new Float64Array(W);
  const perSizeMs = new Float64Array(W);
  const deviationMs = new Float64Array(W);
  const serverBase = new Int32Array(W);
  let servers = 0;
  for (const worker of workers) {
    batchSize[worker.index] = worker.variant.batchSize;
    fixedMs[worker.index] = worker.variant.fixedDelayMs;
    perSizeMs[worker.index] = worker.variant.maxDelayMs - worker.variant.fixedDelayMs;
    deviationMs[worker.index] = worker.variant.delayDeviationMs;
    serverBase[worker.index] = servers;
    if (!(worker.replicas >= 1) || !Number.isFinite(worker.replicas)) {
      throw new RangeError(`worker ${worker.index} needs a finite replica count >= 1`);
    }
    servers += worker.replicas;
  }
  const serverWorker = new Int32Array(servers);
  const memberBase = new Int32Array(servers);
  const batchLength = new Int32Array(servers);
  const freeServers: Int32Array[] = [];
  const freeCount = new Int32Array(W);
  let members = 0;
  for (const worker of workers) {
    const free = new Int32Array(worker.replicas);
    for (let r = 0; r < worker.replicas; r += 1) {
      const g = serverBase[worker.index]! + r;
      serverWorker[g] = worker.index;
      memberBase[g] = members;
      members += worker.variant.batchSize;
      free[r] = g;
    }
    freeServers.push(free);
    freeCount[worker.index] = worker.replicas;
  }
  const batchMembers = new Int32Array(members);
  const queues: Int32Array[] = workers.map(() => new Int32Array(64));
  const queueHead = new Int32Array(W);
  const queueLength = new Int32Array(W);

  // Bound streams, by slot (slots are never reused: a run has thousands of streams, not millions).
  let streamCount = 0;
  let sWorker = new Int32Array(256);
  let sScheduler = new Int32Array(256);
  let sApp = new Int32Array(256);
  let sQueries = new Int32Array(256);
  let sEmitted = new Int32Array(256);
  let sStart = new Float64Array(256);
  let sPeriod = new Float64Array(256);
  let sRate = new Float64Array(256);
  let sSize = new Float64Array(256);
  let sMaxDelay = new Float64Array(256);
  let sUpFixed = new Float64Array(256);
  let sAccess = new Float64Array(256);

  // Queries in flight, by slot (reused through a free list).
  let qStream = new Int32Array(1024);
  let qSent = new Float64Array(1024);
  let freeQueries = new Int32Array(1024);
  let freeQueryCount = 0;
  let queryHigh = 0;
  let inFlight = 0;

  // Rejected streams whose queries are not all counted yet.
  const rejectedStreams: {
    start: number;
    period: number;
    queries: number;
    counted: number;
    app: number;
  }[] = [];

  const recorder = new ObservationRecorder(W);
  const loadOf = (worker: Worker): number => recorder.load(worker.index);
  const events = new EventQueue();
  let now = 0;
  let sampleIndex = 1;
  let nextSampleMs = sampleEveryMs;

  const total: Outcomes = { success: 0, qosFailure: 0, rejected: 0 };
  const window: Outcomes = { success: 0, qosFailure: 0, rejected: 0 };
  const period: Outcomes = { success: 0, qosFailure: 0, rejected: 0 };
  let windowStart = 0;
  let windowSamples: Observation[] = [];
  const appNames: string[] = [];
  const appIndex = new Map<string, number>();
  const appOutcomes: Outcomes[] = [];
  const streamTotals = { arrived: 0, bound: 0, rejected: 0 };
  let queriesOffered = 0;

  function appOf(name: string): number {
    let index = appIndex.get(name);
    if (index === undefined) {
      index = appNames.length;
      appIndex.set(name, index);
      appNames.push(name);
      appOutcomes.push({ success: 0, qosFailure: 0, rejected: 0 });
    }
    return index;
  }

  function countSuccess(app: number): void {
    total.success += 1;
    window.success += 1;
    period.success += 1;
    appOutcomes[app]!.success += 1;
  }

  function countQosFailure(app: number): void {
    total.qosFailure += 1;
    window.qosFailure += 1;
    period.qosFailure += 1;
    appOutcomes[app]!.qosFailure += 1;
  }

  function countRejected(app: number, count: number): void {
    total.rejected += count;
    window.rejected += count;
    period.rejected += count;
    appOutcomes[app]!.rejected += count;
  }

  function allocQuery(): number {
    if (freeQueryCount > 0) return freeQueries[--freeQueryCount]!;
    const slot = queryHigh++;
    if (slot >= qStream.length) {
      qStream = grownI32(qStream, slot + 1);
      qSent = grownF64(qSent, slot + 1);
      freeQueries = grownI32(freeQueries, slot + 1);
    }
    return slot;
  }

  function freeQuery(slot: number): void {
    freeQueries[freeQueryCount++] = slot;
    inFlight -= 1;
  }

  /** A non-negative draw of N(mean, deviation). */
  function linkDraw(s: number): number {
    const key = sScheduler[s]! * W + sWorker[s]!;
    const delay = linkDelay[key]! + linkDeviation[key]! * networkNormal();
    return delay > 0 ? delay : 0;
  }

  /**
   * Schedules the arrival at its worker of stream `s`'s next query. Called when the previous
   * query arrives, so a stream has one pending emission at a time; an arrival that network
   * jitter would put before `notBefore` (the previous query's arrival, several deviations
   * earlier than its own send + delay) is held to it, keeping each stream's queries in order.
   */
  function emitQuery(s: number, notBefore: number): void {
    const k = sEmitted[s]!;
    sEmitted[s] = k + 1;
    const sent = sStart[s]! + k * sPeriod[s]!;
    const arrival = sent + sUpFixed[s]! + linkDraw(s);
    const slot = allocQuery();
    qStream[slot] = s;
    qSent[slot] = sent;
    inFlight += 1;
    events.push(arrival > notBefore ? arrival : notBefore, (slot << KIND_BITS) | ARRIVAL);
  }

  /** Hands queued queries to free servers, a batch each, dropping those already past D^i. */
  function dispatch(w: number): void {
    const queue = queues[w]!;
    const capacity = queue.length;
    const limit = batchSize[w]!;
    while (freeCount[w]! > 0 && queueLength[w]! > 0) {
      const g = freeServers[w]![freeCount[w]! - 1]!;
      const base = memberBase[g]!;
      let taken = 0;
      let largest = 0;
      while (taken < limit && queueLength[w]! > 0) {
        const slot = queue[queueHead[w]!]!;
        queueHead[w] = (queueHead[w]! + 1) % capacity;
        queueLength[w]! -= 1;
        const s = qStream[slot]!;
        if (now - qSent[slot]! > sMaxDelay[s]!) {
          countQosFailure(sApp[s]!);
          freeQuery(slot);
          continue;
        }
        batchMembers[base + taken] = slot;
        taken += 1;
        const size = sSize[s]!;
        if (size > largest) largest = size;
      }
      if (taken === 0) return;
      freeCount[w]! -= 1;
      batchLength[g] = taken;
      const delay = fixedMs[w]! + perSizeMs[w]! * largest + deviationMs[w]! * processingNormal();
      events.push(now + (delay > 0 ? delay : 0), (g << KIND_BITS) | BATCH_DONE);
    }
  }

  function enqueue(w: number, slot: number): void {
    let queue = queues[w]!;
    if (queueLength[w] === queue.length) {
      // Unroll the ring into a buffer twice as large.
      const larger = new Int32Array(queue.length * 2);
      for (let i = 0; i < queueLength[w]; i += 1) {
        larger[i] = queue[(queueHead[w]! + i) % queue.length]!;
      }
      queues[w] = queue = larger;
      queueHead[w] = 0;
    }
    queue[(queueHead[w]! + queueLength[w]!) % queue.length] = slot;
    queueLength[w]! += 1;
  }

  function onArrival(slot: number): void {
    const s = qStream[slot]!;
    if (sEmitted[s]! < sQueries[s]!) emitQuery(s, now);
    const w = sWorker[s]!;
    enqueue(w, slot);
    if (freeCount[w]! > 0) dispatch(w);
  }

  function onBatchDone(g: number): void {
    const w = serverWorker[g]!;
    const base = memberBase[g]!;
    for (let i = 0; i < batchLength[g]!; i += 1) {
      const slot = batchMembers[base + i]!;
      const s = qStream[slot]!;
      events.push(now + sAccess[s]! + linkDraw(s), (slot << KIND_BITS) | DELIVERY);
    }
    freeServers[w]![freeCount[w]!] = g;
    freeCount[w]! += 1;
    dispatch(w);
  }

  function onDelivery(slot: number): void {
    const s = qStream[slot]!;
    // The same relative slack as the constraints: a latency equal to D^i on paper is a success.
    if (now - qSent[slot]! <= sMaxDelay[s]! * (1 + 1e-9)) countSuccess(sApp[s]!);
    else countQosFailure(sApp[s]!);
    recorder.respond(sWorker[s]!);
    freeQuery(slot);
  }

  function onStreamEnd(s: number): void {
    recorder.release(sWorker[s]!, sMaxDelay[s]!, sRate[s]!, sSize[s]!);
  }

  function bind(stream: Stream, scheduler: number, worker: number, app: number): void {
    const s = streamCount++;
    if (s >= sWorker.length) {
      const size = s + 1;
      sWorker = grownI32(sWorker, size);
      sScheduler = grownI32(sScheduler, size);
      sApp = grownI32(sApp, size);
      sQueries = grownI32(sQueries, size);
      sEmitted = grownI32(sEmitted, size);
      sStart = grownF64(sStart, size);
      sPeriod = grownF64(sPeriod, size);
      sRate = grownF64(sRate, size);
      sSize = grownF64(sSize, size);
      sMaxDelay = grownF64(sMaxDelay, size);
      sUpFixed = grownF64(sUpFixed, size);
      sAccess = grownF64(sAccess, size);
    }
    sWorker[s] = worker;
    sScheduler[s] = scheduler;
    sApp[s] = app;
    sQueries[s] = queriesOf(stream);
    sEmitted[s] = 0;
    sStart[s] = now;
    sPeriod[s] = 1000 / stream.rate;
    sRate[s] = stream.rate;
    sSize[s] = stream.size;
    sMaxDelay[s] = stream.maxDelayMs;
    sUpFixed[s] = stream.accessDelayMs + stream.transmissionMsPerSize * stream.size;
    sAccess[s] = stream.accessDelayMs;
    recorder.bind(worker, stream.maxDelayMs, stream.rate, stream.size);
    events.push(now + stream.durationS * 1000, (s << KIND_BITS) | STREAM_END);
    emitQuery(s, now);
  }

  function onStream({ stream }: StreamArrival): void {
    const scheduler = schedulerIndex.get(stream.scheduler);
    if (scheduler === undefined) throw new RangeError(`unknown scheduler ${stream.scheduler}`);
    const app = appOf(stream.app);
    const queries = queriesOf(stream);
    streamTotals.arrived += 1;
    queriesOffered += queries;
    const chosen = placeStream(
      stream,
      topology.schedulers[scheduler]!,
      workers,
      loadOf,
      policy,
      policyUniform,
    );
    if (chosen === undefined) {
      streamTotals.rejected += 1;
      rejectedStreams.push({ start: now, period: 1000 / stream.rate, queries, counted: 0, app });
      return;
    }
    streamTotals.bound += 1;
    bind(stream, scheduler, chosen.worker.index, app);
  }

  /** Counts the rejected streams' queries sent up to and including `t`. */
  function flushRejected(t: number): void {
    for (let i = rejectedStreams.length - 1; i >= 0; i -= 1) {
      const r = rejectedStreams[i]!;
      const sent = Math.min(r.queries, Math.floor((t - r.start) / r.period) + 1);
      if (sent > r.counted) {
        countRejected(r.app, sent - r.counted);
        r.counted = sent;
      }
      if (r.counted === r.queries) {
        rejectedStreams[i] = rejectedStreams[rejectedStreams.length - 1]!;
        rejectedStreams.pop();
      }
    }
  }

  function sample(t: number): void {
    flushRejected(t);
    windowSamples.push(recorder.sample(t, sampleEveryMs, { ...period }));
    period.success = 0;
    period.qosFailure = 0;
    period.rejected = 0;
  }

  function runUntil(ms: number): void {
    if (ms < now) throw new RangeError(`cannot run back to ${ms} ms from ${now} ms`);
    for (;;) {
      const tEvent = events.peekTime();
      const tStream = source.peekMs();
      if (tEvent <= tStream && tEvent <= nextSampleMs) {
        if (tEvent > ms) break;
        now = tEvent;
        const payload = events.pop();
        const id = payload >>> KIND_BITS;
        switch (payload & KIND_MASK) {
          case ARRIVAL:
            onArrival(id);
            break;
          case BATCH_DONE:
            onBatchDone(id);
            break;
          case DELIVERY:
            onDelivery(id);
            break;
          default:
            onStreamEnd(id);
        }
      } else if (tStream <= nextSampleMs) {
        if (tStream > ms) break;
        now = tStream;
        onStream(source.next());
      } else {
        if (nextSampleMs > ms) break;
        now = nextSampleMs;
        sample(now);
        sampleIndex += 1;
        nextSampleMs = sampleIndex * sampleEveryMs;
      }
    }
    now = ms;
    flushRejected(ms);
  }

  function totals(): Totals {
    const perApp: Record<string, Outcomes> = {};
    appNames.forEach((name, i) => (perApp[name] = { ...appOutcomes[i]! }));
    return {
      ...total,
      perApp,
      streams: { ...streamTotals },
      queriesOffered,
      inFlight,
    };
  }

  function takeWindow(): SimulationWindow {
    const taken: SimulationWindow = {
      startMs: windowStart,
      endMs: now,
      policy: policyName,
      ...window,
      samples: windowSamples,
    };
    window.success = 0;
    window.qosFailure = 0;
    window.rejected = 0;
    windowStart = now;
    windowSamples = [];
    return taken;
  }

  return {
    setPolicy(name: PolicyName) {
      const next = policyTable[name];
      if (next === undefined) throw new RangeError(`unknown policy ${String(name)}`);
      policyName = name;
      policy = next;
    },
    get policy() {
      return policyName;
    },
    runUntil,
    now: () => now,
    totals,
    takeWindow,
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
export type {
  SimulationOptions,
  Outcomes,
  Totals,
  SimulationWindow,
  Simulation,
  WindowOutcomes,
  StaticRun,
  ArrivalSource,
};
