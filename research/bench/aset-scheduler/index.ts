/**
 * research/bench/aset-scheduler: what a binding decision and a window roll of the
 * aset-scheduler cost, and that its shared state stays exact, on the full-edge topology with its
 * trained network (models/aset-full-edge.onnx) and a private redis-server (or REDIS_URL, under a
 * key prefix of this run's own).
 *
 * 1. Binding over HTTP: the function as the container runs it (function.ts), streams drawn from
 *    the paper's workload (Table I apps at the four access points, workload.ts), each with an id
 *    of its own. A round binds a batch (POST /v1/streams) then ends every bound stream (DELETE),
 *    so the reserved load starts at zero each round; the batch is the number of streams held at
 *    steady state under the paper's default load (lambda = 60 clients/min per access point,
 *    Little's law), so capacity is as contended as in the simulated evaluation. At concurrency 1
 *    (one keep-alive connection) and 32. Latency is a client's: request written to answer read.
 * 2. The same rounds in-process (createAsetScheduler on the same Redis, no HTTP), interleaved
 *    with the HTTP rounds (ABBA), with the Redis commands one decision sends counted and one
 *    Redis round trip (PING) timed beside it: what HTTP adds and what Redis costs.
 * 3. Window roll: the scheduler's tick when a window of T is due (the store's roll script, the
 *    sweep, the meta-policy's choice by the ONNX network, storing it) with the batch bound, on a
 *    clock stepped by T = 100 ms; one stream ends and another binds between rolls.
 * 4. Correctness: at the end of every batch (the round's peak) no worker's reserved load read
 *    from Redis exceeds its capacity, and it equals the sum of size x rate of the streams the
 *    client saw bound there; after every stream has ended, every worker's load is 0.
 *
 * Targets: HTTP bind p99 at concurrency 1 <= 5 ms (decisions must be negligible against
 * deadlines of tens of ms), >= 1,000 binds/s over HTTP at concurrency 32, roll p99 <= 20 ms,
 * residue max |load| <= 1e-9, peak load / capacity <= 1 (+ the constraint's 1e-9 slack).
 * BENCH_ROUNDS (default 24) measured rounds per path and concurrency, after BENCH_WARM_SECONDS
 * (default 6) of unmeasured rounds;
 * BENCH_ROLLS (default 200) measured rolls, after 20 warm-up rolls.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { createDeployedController } from '../../../shared/aset/aset-controller.js';
import type { AsetController } from '../../../shared/aset/aset-controller.js';
import { createBindingStore } from '../../../shared/aset/binding-store.js';
import type { BindingStore } from '../../../shared/aset/binding-store.js';
import { readTrainedNetwork } from '../../../shared/aset/network-card.js';
import { loadScenario } from '../../../shared/aset/scenario.js';
import type { Scenario } from '../../../shared/aset/scenario.js';
import { loadAsetSchedulerConfig } from '../../../shared/aset/scheduler-config.js';
import type { AsetSchedulerConfig } from '../../../shared/aset/scheduler-config.js';
import { createAsetScheduler } from '../../../shared/aset/scheduler.js';
import type { AsetScheduler, SchedulerStatus } from '../../../shared/aset/scheduler.js';
import { streamRequest } from '../../../shared/aset/stream-request.js';
import type { StreamRequest } from '../../../shared/aset/stream-request.js';
import type { PolicyName } from '../../../shared/aset/types.js';
import type { WindowController } from '../../../shared/aset/window.js';
import { constantLambda, Workload } from '../../aset/sim/workload.js';
import { startRedisServer } from '../../../local/index.js';
import type { RedisServer } from '../../../local/index.js';
import { createRedis, waitReady } from '../../../shared/redis/index.js';
import type { RedisClient } from '../../../shared/redis/index.js';
import { finish, printTable } from '../../../bench/support/report.js';
import type { Target } from '../../../bench/support/report.js';
import { startFunction } from './function.js';
import type { FunctionProcess } from './function.js';

const topologyName = 'full-edge';
const lambda = 60;
const concurrencies = [1, 32] as const;
const rounds = Number(process.env['BENCH_ROUNDS'] ?? 24);
const warmMs = Number(process.env['BENCH_WARM_SECONDS'] ?? 6) * 1000;
const rolls = Number(process.env['BENCH_ROLLS'] ?? 200);
const warmRolls = 20;
const rollWindowMs = 100;
const root = new URL('../../../../', import.meta.url);

type Mode = 'http' | 'in-process';
const modes: readonly Mode[] = ['http', 'in-process'];

/** What a round needs of a path to the scheduler. */
interface Binder {
  readonly mode: Mode;
  bind(request: StreamRequest): Promise<{ worker: number } | 'rejected'>;
  release(id: string): Promise<void>;
  status(): Promise<SchedulerStatus>;
  /** Redis commands sent so far by this path's client (in-process only). */
  commands?(): number;
  close(): void;
}

interface Held {
  readonly id: string;
  readonly worker: number;
  readonly delta: number;
}

interface RoundResult {
  bindMs: number[];
  releaseMs: number[];
  bindWallMs: number;
  releaseWallMs: number;
  bound: number;
  rejected: number;
  /** Max over workers with finite capacity of load / capacity at the batch's peak. */
  peakRatio: number;
  /** Max over workers of |Redis load - client's sum of size x rate| at the peak. */
  bookkeeping: number;
  bindCommands: number;
  releaseCommands: number;
}

/** Nearest-rank percentile of an ascending list. */
function percentile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

const round3 = (x: number) => Math.round(x * 1000) / 1000;

function summarize(values: readonly number[]) {
  const sorted = [...values].sort((a, b) => a - b);
  return {
    p50: round3(percentile(sorted, 0.5)),
    p99: round3(percentile(sorted, 0.99)),
    max: round3(sorted[sorted.length - 1] ?? Number.NaN),
  };
}

/** Runs `work` over `items` with `concurrency` outstanding, timing each; returns the wall time. */
async function pump<T>(
  items: readonly T[],
  concurrency: number,
  work: (item: T) => Promise<void>,
  times: number[],
): Promise<number> {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: Math.min(concurrency, items.length) }, async () => {
      while (next < items.length) {
        const item = items[next++]!;
        const t0 = performance.now();
        await work(item);
        times.push(performance.now() - t0);
      }
    }),
  );
  return performance.now() - started;
}

/** Binds the batch, checks the peak, ends every bound stream. */
async function runRound(
  binder: Binder,
  batch: readonly StreamRequest[],
  concurrency: number,
): Promise<RoundResult> {
  const held: Held[] = [];
  let rejected = 0;
  const bindMs: number[] = [];
  const releaseMs: number[] = [];
  const commands0 = binder.commands?.() ?? 0;
  const bindWallMs = await pump(
    batch,
    concurrency,
    async (request) => {
      const outcome = await binder.bind(request);
      if (outcome === 'rejected') rejected += 1;
      else
        held.push({ id: request.id, worker: outcome.worker, delta: request.size * request.rate });
    },
    bindMs,
  );
  const commands1 = binder.commands?.() ?? 0;
  // The peak of the round: nothing has ended since the batch began.
  const status = await binder.status();
  const expected = new Float64Array(status.workers.length);
  for (const h of held) expected[h.worker]! += h.delta;
  let peakRatio = 0;
  let bookkeeping = 0;
  for (const w of status.workers) {
    if (w.capacity !== null) peakRatio = Math.max(peakRatio, w.load / w.capacity);
    bookkeeping = Math.max(bookkeeping, Math.abs(w.load - expected[w.index]!));
  }
  if (status.bindings !== held.length) {
    throw new Error(`${binder.mode}: ${status.bindings} bindings in Redis, ${held.length} bound`);
  }
  const commands2 = binder.commands?.() ?? 0;
  const releaseWallMs = await pump(held, concurrency, (h) => binder.release(h.id), releaseMs);
  const commands3 = binder.commands?.() ?? 0;
  return {
    bindMs,
    releaseMs,
    bindWallMs,
    releaseWallMs,
    bound: held.length,
    rejected,
    peakRatio,
    bookkeeping,
    bindCommands: commands1 - commands0,
    releaseCommands: commands3 - commands2,
  };
}

function httpBinder(fn: FunctionProcess, sockets: number): Binder {
  const client = fn.client(sockets);
  return {
    mode: 'http',
    async bind(request) {
      const answer = await client.send('POST', '/v1/streams', JSON.stringify(request));
      if (answer.status === 201) {
        return { worker: (JSON.parse(answer.text) as { worker: { index: number } }).worker.index };
      }
      // A 409 is either the paper's rejection (an outcome) or a conflict (a fault here).
      if (answer.status === 409 && answer.text.includes('"error":"StreamRejected"')) {
        return 'rejected';
      }
      throw new Error(`POST /v1/streams ${request.id}: ${answer.status} ${answer.text}`);
    },
    async release(id) {
      const answer = await client.send('DELETE', `/v1/streams/${encodeURIComponent(id)}`);
      if (answer.status !== 200) {
        throw new Error(`DELETE /v1/streams/${id}: ${answer.status} ${answer.text}`);
      }
    },
    async status() {
      const answer = await client.send('GET', '/v1/scheduler');
      if (answer.status !== 200) throw new Error(`GET /v1/scheduler: ${answer.status}`);
      return JSON.parse(answer.text) as SchedulerStatus;
    },
    close: () => client.close(),
  };
}

function processBinder(scheduler: AsetScheduler, commands: () => number): Binder {
  return {
    mode: 'in-process',
    async bind(request) {
      const outcome = await scheduler.request(request);
      if (outcome.kind === 'rejected') return 'rejected';
      if (outcome.replay) throw new Error(`stream ${request.id} was bound before`);
      return { worker: outcome.placement.worker.index };
    },
    async release(id) {
      if ((await scheduler.end(id)) === undefined) throw new Error(`stream ${id} had no binding`);
    },
    status: () => scheduler.status(),
    commands,
    close: () => undefined,
  };
}

/** A client of the run's Redis under `prefix`, counting the commands it sends. */
async function redisClient(url: string, prefix: string) {
  const client = createRedis(
    { url, keyPrefix: prefix, commandTimeoutMs: 5000, connectTimeoutMs: 2000 },
    (err) => process.stderr.write(`redis: ${err.message}\n`),
  );
  await waitReady(client, 10_000);
  let sent = 0;
  // One Redis or a cluster: whichever sendCommand it has, each call is one command.
  type Send = (...args: unknown[]) => unknown;
  const counted = client as unknown as { sendCommand: Send };
  const send = counted.sendCommand.bind(client);
  counted.sendCommand = (...args) => {
    sent += 1;
    return send(...args);
  };
  return { client, commands: () => sent };
}

/** The paper's workload on the topology: arrivals in time order, as requests with fresh ids. */
function streamSource(scenario: Scenario) {
  const { apps, topology, durationScale } = scenario;
  const workload = new Workload({
    apps,
    schedulers: topology.schedulers.map((s) => s.id),
    lambda: constantLambda(lambda),
    durationScale,
    seed: 20261125,
  });
  const meanDurationS =
    (apps.reduce((sum, app) => sum + (app.durationS[0] + app.durationS[1]) / 2, 0) / apps.length) *
    durationScale;
  // Little's law: streams held = arrivals per second x mean duration.
  const steadyState = Math.round((lambda / 60) * topology.schedulers.length * meanDurationS);
  return {
    steadyState,
    take(count: number, tag: string): StreamRequest[] {
      return Array.from({ length: count }, (_, i) => {
        const { stream } = workload.next();
        return streamRequest.parse({
          id: `${tag}-${i}`,
          scheduler: stream.scheduler,
          task: stream.task,
          maxDelayMs: stream.maxDelayMs,
          minAccuracy: stream.minAccuracy,
          rate: stream.rate,
          size: stream.size,
          transmissionMsPerSize: stream.transmissionMsPerSize,
          accessDelayMs: stream.accessDelayMs,
          durationS: stream.durationS,
          app: stream.app,
        });
      });
    },
  };
}

type StreamSource = ReturnType<typeof streamSource>;

/** Deletes every key starting with `base` (`client` has no key prefix of its own). */
async function deleteKeys(client: RedisClient, base: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await client.scan(cursor, 'MATCH', `${base}*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) await client.del(...keys);
  } while (cursor !== '0');
}

/** Max |load|, streams and bindings left in a store. */
async function residue(store: BindingStore) {
  const snapshot = await store.snapshot();
  let load = 0;
  let streams = 0;
  for (let w = 0; w < snapshot.load.length; w += 1) {
    load = Math.max(load, Math.abs(snapshot.load[w]!));
    streams += Math.abs(snapshot.streams[w]!);
  }
  return { load, streams, bindings: snapshot.bindings };
}

/** What the wrappers around the store and the controller record during rolls. */
interface RollLog {
  readonly windowLua: number[];
  readonly choose: number[];
  rolled: number;
  readonly chosen: Map<PolicyName, number>;
}

/** `store` with its roll script timed: only calls that rolled a window count. */
function timedStore(store: BindingStore, log: RollLog): BindingStore {
  return {
    reserve: (record, capacity, nowMs) => store.reserve(record, capacity, nowMs),
    find: (id) => store.find(id),
    release: (id, nowMs) => store.release(id, nowMs),
    sweep: (nowMs, limit) => store.sweep(nowMs, limit),
    loads: (workers) => store.loads(workers),
    async window(nowMs, windowMs) {
      const t0 = performance.now();
      const outcome = await store.window(nowMs, windowMs);
      if (outcome.kind === 'rolled') {
        log.windowLua.push(performance.now() - t0);
        log.rolled += 1;
      }
      return outcome;
    },
    setPolicy: (startMs, policy) => store.setPolicy(startMs, policy),
    addResponses: (delivery, counts) => store.addResponses(delivery, counts),
    snapshot: () => store.snapshot(),
  };
}

/** `controller` with its choices after a window timed (the first choice has none before it). */
function timedController(
  controller: AsetController,
  log: RollLog,
): WindowController & { readonly lastQ: Float32Array | undefined } {
  return {
    name: controller.name,
    get lastQ() {
      return controller.lastQ;
    },
    async choose(previous) {
      const t0 = performance.now();
      const policy = await controller.choose(previous);
      if (previous !== undefined) log.choose.push(performance.now() - t0);
      return policy;
    },
  };
}

/**
 * warmRolls + rolls ticks on `clock`, each when a window is due; returns the measured ticks'
 * times and clears `log` after the warm-up rolls.
 */
async function rollWindows(
  scheduler: AsetScheduler,
  clock: { now: number },
  live: string[],
  fresh: readonly StreamRequest[],
  log: RollLog,
): Promise<number[]> {
  const tick: number[] = [];
  for (let i = 0; i < warmRolls + rolls; i += 1) {
    if (i === warmRolls) {
      log.windowLua.length = 0;
      log.choose.length = 0;
      log.chosen.clear();
      log.rolled = 0;
    }
    clock.now += rollWindowMs;
    const t0 = performance.now();
    await scheduler.tick();
    if (i >= warmRolls) tick.push(performance.now() - t0);
    // Within the new window: one stream ends, another binds, so the next window's features move.
    clock.now += 1;
    const ending = live.shift();
    if (ending !== undefined) await scheduler.end(ending);
    const request = fresh[i]!;
    if ((await scheduler.request(request)).kind === 'bound') live.push(request.id);
  }
  return tick;
}

/**
 * Rolls: the scheduler's tick on a clock stepped by one window, the store's roll script and the
 * controller's choice timed inside it.
 */
async function measureRolls(
  scenario: Scenario,
  store: BindingStore,
  held: StreamRequest[],
  more: (count: number) => StreamRequest[],
  leaseGraceMs: number,
) {
  const controller = await createDeployedController({
    network: readTrainedNetwork(new URL('models/', root), scenario),
    topology: scenario.topology,
  });
  try {
    return await rollWith(controller, scenario.topology, store, held, more, leaseGraceMs);
  } finally {
    await controller.close();
  }
}

/** The rolls of measureRolls with its controller (closed by the caller, whatever happens). */
async function rollWith(
  controller: AsetController,
  topology: Scenario['topology'],
  store: BindingStore,
  held: StreamRequest[],
  more: (count: number) => StreamRequest[],
  leaseGraceMs: number,
) {
  const log: RollLog = { windowLua: [], choose: [], rolled: 0, chosen: new Map() };
  const clock = { now: Date.now() };
  let errors = 0;
  const scheduler = createAsetScheduler({
    topology,
    store: timedStore(store, log),
    controller: timedController(controller, log),
    windowMs: rollWindowMs,
    leaseGraceMs,
    now: () => clock.now,
    uniform: Math.random,
    onChoiceError: () => (errors += 1),
    onWindow: (policy) => log.chosen.set(policy, (log.chosen.get(policy) ?? 0) + 1),
  });
  const live: string[] = [];
  for (const request of held) {
    if ((await scheduler.request(request)).kind === 'bound') live.push(request.id);
  }
  const boundAtStart = live.length;
  const tick = await rollWindows(scheduler, clock, live, more(warmRolls + rolls), log);
  if (log.rolled !== rolls || log.choose.length !== rolls || errors > 0) {
    throw new Error(
      `${rolls} ticks rolled ${log.rolled} windows, ${log.choose.length} choices, ${errors} errors`,
    );
  }
  for (const id of live) await scheduler.end(id);
  return {
    tick: summarize(tick),
    windowLua: summarize(log.windowLua),
    choose: summarize(log.choose),
    boundAtStart,
    chosen: log.chosen,
    controller: controller.lastQ === undefined ? 'static policy (card)' : 'ONNX network',
  };
}

/** What binding rounds run against: the function over HTTP and a scheduler in this process. */
interface BindingSetup {
  readonly fn: FunctionProcess;
  readonly inProcess: AsetScheduler;
  /** Redis commands sent so far by the in-process scheduler's client. */
  readonly commands: () => number;
  readonly source: StreamSource;
  readonly batch: number;
}

/** Both paths, the HTTP one over `sockets` keep-alive connections. */
function bothPaths(setup: BindingSetup, sockets: number): Binder[] {
  return [httpBinder(setup.fn, sockets), processBinder(setup.inProcess, setup.commands)];
}

/** `streams` under ids of `binder`'s own, so both paths can bind the same streams. */
function taggedFor(binder: Binder, streams: readonly StreamRequest[]): StreamRequest[] {
  return streams.map((s) => ({ ...s, id: `${binder.mode}-${s.id}` }));
}

/** Unmeasured rounds down both paths at concurrency 32 until warmMs has passed. */
async function warmUp(setup: BindingSetup): Promise<void> {
  const warmStart = performance.now();
  for (let r = 0; performance.now() - warmStart < warmMs; r += 1) {
    const binders = bothPaths(setup, 32);
    const streams = setup.source.take(setup.batch, `warm-${r}`);
    for (const binder of binders) {
      await runRound(binder, taggedFor(binder, streams), 32);
      binder.close();
    }
  }
}

/** One unmeasured round then `rounds` measured ones down both paths at concurrency `c`. */
async function measureAt(
  setup: BindingSetup,
  c: number,
  results: Map<string, RoundResult[]>,
): Promise<void> {
  const binders = bothPaths(setup, c);
  try {
    for (let r = -1; r < rounds; r += 1) {
      // The same streams down both paths; ABBA order, so drift hits both alike.
      const streams = setup.source.take(setup.batch, `c${c}-r${r + 1}`);
      const order = r % 2 === 0 ? binders : [...binders].reverse();
      for (const binder of order) {
        const result = await runRound(binder, taggedFor(binder, streams), c);
        if (r < 0) continue;
        const name = `${binder.mode}/${c}`;
        results.set(name, [...(results.get(name) ?? []), result]);
      }
    }
  } finally {
    for (const binder of binders) binder.close();
  }
}

/** The measured binding rounds, by `${mode}/${concurrency}`. */
async function measureBinding(setup: BindingSetup): Promise<Map<string, RoundResult[]>> {
  const results = new Map<string, RoundResult[]>();
  // V8 goes on optimizing for seconds: both paths run rounds at concurrency 32 for warmMs
  // before anything is measured; then each concurrency has one unmeasured round of its own.
  await warmUp(setup);
  for (const c of concurrencies) await measureAt(setup, c, results);
  return results;
}

/** One Redis round trip, from this process, one at a time. */
async function measurePing(client: RedisClient): Promise<number[]> {
  const ping: number[] = [];
  for (let i = 0; i < 2000; i += 1) {
    const t0 = performance.now();
    await client.ping();
    if (i >= 200) ping.push(performance.now() - t0);
  }
  return ping;
}

type Counted = Awaited<ReturnType<typeof redisClient>>;
type Part = 'http' | 'inProcess' | 'roll';

/** The run's Redis clients: one without a prefix, and a client and a store per part. */
interface Connections {
  readonly admin: Counted;
  readonly redis: Readonly<Record<Part, Counted>>;
  readonly stores: Readonly<Record<Part, BindingStore>>;
}

async function connect(
  url: string,
  prefixes: Readonly<Record<Part, string>>,
  topology: Scenario['topology'],
  settings: AsetSchedulerConfig,
): Promise<Connections> {
  const storeFor = (client: RedisClient) =>
    createBindingStore(client, {
      topology: topology.name,
      workers: topology.workers.length,
      tombstoneMs: settings.tombstoneMs,
      dedupeSeconds: settings.dedupeSeconds,
    });
  const admin = await redisClient(url, '');
  const redis = {
    http: await redisClient(url, prefixes.http),
    inProcess: await redisClient(url, prefixes.inProcess),
    roll: await redisClient(url, prefixes.roll),
  };
  const stores = {
    http: storeFor(redis.http.client),
    inProcess: storeFor(redis.inProcess.client),
    roll: storeFor(redis.roll.client),
  };
  return { admin, redis, stores };
}

/** Binding rounds, Redis round trips, rolls, then what every store has left. */
async function measureAll(
  setup: BindingSetup,
  connections: Connections,
  scenario: Scenario,
  leaseGraceMs: number,
) {
  const { source, batch } = setup;
  const { admin, stores } = connections;
  const results = await measureBinding(setup);
  const ping = await measurePing(admin.client);
  const roll = await measureRolls(
    scenario,
    stores.roll,
    source.take(batch, 'roll'),
    (n) => source.take(n, 'roll-more'),
    leaseGraceMs,
  );

  // Everything has ended: read every worker's load back from Redis.
  const left = {
    http: await residue(stores.http),
    inProcess: await residue(stores.inProcess),
    roll: await residue(stores.roll),
  };
  return { results, ping, roll, left };
}

type Measurements = Awaited<ReturnType<typeof measureAll>>;

function pathFigures(list: readonly RoundResult[]) {
  const sum = (f: (r: RoundResult) => number) => list.reduce((s, r) => s + f(r), 0);
  const bound = sum((r) => r.bound);
  const rejected = sum((r) => r.rejected);
  return {
    binds: bound + rejected,
    bound,
    rejected,
    bindsPerS: ((bound + rejected) * 1000) / sum((r) => r.bindWallMs),
    releasesPerS: (bound * 1000) / sum((r) => r.releaseWallMs),
    bind: summarize(list.flatMap((r) => r.bindMs)),
    release: summarize(list.flatMap((r) => r.releaseMs)),
  };
}

type PathFigures = ReturnType<typeof pathFigures>;

/** What the tables, the figures and the targets report, computed once from the measurements. */
function summarizeRun(m: Measurements) {
  const paths = new Map<string, PathFigures>();
  for (const c of concurrencies) {
    for (const mode of modes) {
      paths.set(`${mode}/${c}`, pathFigures(m.results.get(`${mode}/${c}`) ?? []));
    }
  }
  const all = [...m.results.values()].flat();
  const procRounds = concurrencies.flatMap((c) => m.results.get(`in-process/${c}`) ?? []);
  const binds = procRounds.reduce((s, r) => s + r.bound + r.rejected, 0);
  const releases = procRounds.reduce((s, r) => s + r.bound, 0);
  const { left } = m;
  return {
    paths,
    proc1: paths.get('in-process/1')!,
    http1: paths.get('http/1')!,
    ping: summarize(m.ping),
    perBind: procRounds.reduce((s, r) => s + r.bindCommands, 0) / binds,
    perRelease: procRounds.reduce((s, r) => s + r.releaseCommands, 0) / releases,
    roll: m.roll,
    peaks: all.length,
    peakRatio: Math.max(...all.map((r) => r.peakRatio)),
    bookkeeping: Math.max(...all.map((r) => r.bookkeeping)),
    left,
    residueLoad: Math.max(left.http.load, left.inProcess.load, left.roll.load),
    bindingsLeft: left.http.bindings + left.inProcess.bindings + left.roll.bindings,
    streamsLeft: left.http.streams + left.inProcess.streams + left.roll.streams,
  };
}

type RunSummary = ReturnType<typeof summarizeRun>;

function printBinding(paths: ReadonlyMap<string, PathFigures>, batch: number): void {
  const rows = concurrencies.flatMap((c) =>
    modes.map((mode) => {
      const f = paths.get(`${mode}/${c}`)!;
      return [
        mode === 'http' ? 'HTTP (bundle)' : 'in-process',
        c,
        f.binds,
        f.bound,
        f.rejected,
        Math.round(f.bindsPerS),
        f.bind.p50,
        f.bind.p99,
        f.bind.max,
        Math.round(f.releasesPerS),
        f.release.p50,
        f.release.p99,
      ];
    }),
  );
  printTable(
    `binding: POST /v1/streams (then DELETE each bound stream), batches of ${batch}, ms`,
    [
      'path',
      'conc.',
      'binds',
      'bound',
      'rejected',
      'binds/s',
      'p50',
      'p99',
      'max',
      'releases/s',
      'rel. p50',
      'rel. p99',
    ],
    rows,
  );
}

function printDecision(s: RunSummary): void {
  printTable(
    'where a decision goes (concurrency 1, p50 ms)',
    ['part', 'value'],
    [
      ['Redis round trip (PING from this process)', s.ping.p50],
      ['Redis commands per decision (in-process, counted)', round3(s.perBind)],
      ['Redis commands per release', round3(s.perRelease)],
      ['decision in-process (bind)', s.proc1.bind.p50],
      ['decision over HTTP (bind)', s.http1.bind.p50],
      ['HTTP adds (bundle: parse, route, log, JSON)', round3(s.http1.bind.p50 - s.proc1.bind.p50)],
    ],
  );
}

function printRoll(roll: RunSummary['roll']): void {
  printTable(
    `window roll (tick when T = ${rollWindowMs} ms is due, ${roll.boundAtStart} streams bound, ${rolls} rolls, ${roll.controller}), ms`,
    ['part', 'p50', 'p99', 'max'],
    [
      ['roll: tick (roll script + sweep + choice + store)', ...Object.values(roll.tick)],
      ['  roll script (time-averaged features)', ...Object.values(roll.windowLua)],
      ['  meta-policy choice (ONNX)', ...Object.values(roll.choose)],
    ],
  );
  process.stdout.write(
    `policies chosen: ${[...roll.chosen.entries()].map(([p, n]) => `${p} ${n}`).join(', ')}\n`,
  );
}

function printState(s: RunSummary): void {
  const { left } = s;
  printTable(
    'state in Redis',
    ['check', 'value'],
    [
      [`max load / capacity at a batch's peak (${s.peaks} peaks)`, s.peakRatio.toFixed(6)],
      ['max |load - client sum of size x rate| at a peak', s.bookkeeping.toExponential(2)],
      [
        'after every stream ended: max |load| (HTTP, in-process, roll)',
        [left.http.load, left.inProcess.load, left.roll.load]
          .map((x) => x.toExponential(1))
          .join(', '),
      ],
      ['after every stream ended: streams, bindings left', `${s.streamsLeft}, ${s.bindingsLeft}`],
    ],
  );
}

/** The binding table's figures, per path and concurrency. */
function bindingFigures(paths: ReadonlyMap<string, PathFigures>): Record<string, number> {
  const figures: Record<string, number> = {};
  for (const c of concurrencies) {
    for (const mode of modes) {
      const f = paths.get(`${mode}/${c}`)!;
      const key = `${mode === 'http' ? 'http' : 'inproc'}_c${c}`;
      figures[`${key}_bind_p50_ms`] = f.bind.p50;
      figures[`${key}_bind_p99_ms`] = f.bind.p99;
      figures[`${key}_binds_per_s`] = Math.round(f.bindsPerS);
      figures[`${key}_bound`] = f.bound;
      figures[`${key}_rejected`] = f.rejected;
      figures[`${key}_release_p50_ms`] = f.release.p50;
      figures[`${key}_release_p99_ms`] = f.release.p99;
      figures[`${key}_releases_per_s`] = Math.round(f.releasesPerS);
    }
  }
  return figures;
}

/** The JSON line's figures, in the order of the tables. */
function runFigures(s: RunSummary, seconds: number): Record<string, number> {
  return {
    ...bindingFigures(s.paths),
    redis_ping_p50_ms: s.ping.p50,
    redis_ping_p99_ms: s.ping.p99,
    redis_commands_per_bind: round3(s.perBind),
    redis_commands_per_release: round3(s.perRelease),
    http_overhead_c1_p50_ms: round3(s.http1.bind.p50 - s.proc1.bind.p50),
    roll_p50_ms: s.roll.tick.p50,
    roll_p99_ms: s.roll.tick.p99,
    roll_script_p50_ms: s.roll.windowLua.p50,
    roll_script_p99_ms: s.roll.windowLua.p99,
    roll_choose_p50_ms: s.roll.choose.p50,
    roll_choose_p99_ms: s.roll.choose.p99,
    peak_load_over_capacity: s.peakRatio,
    peak_bookkeeping_error: s.bookkeeping,
    residue_max_abs_load: s.residueLoad,
    bindings_left: s.bindingsLeft,
    streams_left: s.streamsLeft,
    seconds,
  };
}

function runTargets(s: RunSummary): Record<string, Target> {
  return {
    http_c1_bind_p99_ms: { value: s.http1.bind.p99, op: '<=', target: 5 },
    http_c32_binds_per_s: {
      value: Math.round(s.paths.get('http/32')!.bindsPerS),
      op: '>=',
      target: 1000,
    },
    roll_p99_ms: { value: s.roll.tick.p99, op: '<=', target: 20 },
    residue_max_abs_load: { value: s.residueLoad, op: '<=', target: 1e-9 },
    peak_load_over_capacity: { value: s.peakRatio, op: '<=', target: 1 + 1e-9 },
  };
}

/** The tables, the bench's time, then the targets and the JSON line. */
function report(m: Measurements, batch: number, started: number): void {
  const s = summarizeRun(m);
  printBinding(s.paths, batch);
  printDecision(s);
  printRoll(s.roll);
  printState(s);
  const seconds = Math.round((performance.now() - started) / 100) / 10;
  process.stdout.write(`\nbench time ${seconds} s\n`);
  finish('aset-scheduler', runFigures(s, seconds), runTargets(s));
}

function printPlan(
  topology: Scenario['topology'],
  batch: number,
  server: RedisServer | undefined,
  base: string,
): void {
  process.stdout.write(
    `bench/aset-scheduler: ${topologyName} (${topology.workers.length} workers, ${topology.schedulers.length} access points), ` +
      `batches of ${batch} streams (held at steady state at lambda = ${lambda}/min), ` +
      `${rounds} rounds per path at concurrency 1 and 32, ${rolls} rolls; ` +
      `Redis ${server === undefined ? 'REDIS_URL' : `private on ${server.port}`}, keys under ${base}-*\n`,
  );
}

export async function main(): Promise<void> {
  const started = performance.now();
  const scenario = await loadScenario(new URL('data/aset/', root), topologyName);
  const { topology } = scenario;
  // The function's own settings with their defaults (T = 25 s, lease grace 30 s, ...).
  const settings = loadAsetSchedulerConfig({ ASET_TOPOLOGY: topologyName }, '/');
  const source = streamSource(scenario);
  const batch = source.steadyState;
  const server = process.env['REDIS_URL'] ? undefined : await startRedisServer();
  const url = process.env['REDIS_URL'] ?? server!.url;
  // REDIS_KEY_PREFIX: 1-64 of [A-Za-z0-9_.-] and one ":" at the end.
  const base = `bench-aset-scheduler-${randomUUID()}`;
  const prefixes = { http: `${base}-http:`, inProcess: `${base}-proc:`, roll: `${base}-roll:` };
  printPlan(topology, batch, server, base);
  // Everything opened so far is closed whatever fails next: a redis-server left running keeps
  // the bench process from exiting.
  let connections: Awaited<ReturnType<typeof connect>> | undefined;
  let controller: AsetController | undefined;
  let fn: FunctionProcess | undefined;
  try {
    connections = await connect(url, prefixes, topology, settings);
    controller = await createDeployedController({
      network: readTrainedNetwork(new URL('models/', root), scenario),
      topology,
    });
    fn = await startFunction(url, prefixes.http);
    const inProcess = createAsetScheduler({
      topology,
      store: connections.stores.inProcess,
      controller,
      windowMs: settings.windowMs,
      leaseGraceMs: settings.leaseGraceMs,
      now: Date.now,
      uniform: Math.random,
    });
    const setup = { fn, inProcess, commands: connections.redis.inProcess.commands, source, batch };
    const measured = await measureAll(setup, connections, scenario, settings.leaseGraceMs);
    report(measured, batch, started);
  } finally {
    await fn?.stop();
    await controller?.close();
    if (connections !== undefined) {
      const { admin, redis } = connections;
      await deleteKeys(admin.client, base).catch(() => undefined);
      for (const r of [admin, redis.http, redis.inProcess, redis.roll]) r.client.disconnect();
    }
    await server?.stop();
  }
}
