/**
 * aset-scheduler while Redis fails over: 8 replicas, each with its own client, bind a few hundred
 * streams against the workers' capacity and end them, some requests and ends sent to two replicas
 * (a redelivery, racing the original or after its answer); the master holding the bindings' slot
 * (or the Sentinel master) is SIGKILLed after a quarter of the streams. No sampled load may exceed
 * a worker's capacity, a stream is reserved once (every answer names the same placement), the
 * streams held across the failover are all still bound, and once every stream has ended every
 * load and stream count is back to 0 with no binding left.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBindingStore } from '../../shared/aset/binding-store.js';
import type { BindingStore } from '../../shared/aset/binding-store.js';
import { createAsetScheduler } from '../../shared/aset/scheduler.js';
import type {
  AsetScheduler,
  Placement,
  RequestOutcome,
  SchedulerStatus,
} from '../../shared/aset/scheduler.js';
import { streamRequest } from '../../shared/aset/stream-request.js';
import type { StreamRequest } from '../../shared/aset/stream-request.js';
import { NotFoundError } from '../../shared/errors/index.js';
import { seededRandom } from '../../shared/random/index.js';
import { hashTag, key } from '../../shared/redis/index.js';
import { tiny } from '../support/aset.js';
import { pool, report, retrying, startFailoverRedis } from './redis-failover.js';
import type { FailoverRedis, Topology } from './redis-failover.js';

/** Two workers (access and cloud), 50 of capacity each: 5 to 10 streams of load 10 or 5 apiece. */
const asetTopology = tiny('v', true);
const workerIndexes = asetTopology.workers.map((w) => w.index);
const storeName = 'failover-tiny';
const replicaCount = 8;
const streams = 320;
/** Streams in flight at once: more than the capacity holds, so replicas race for the last of it. */
const width = 16;
/** Constraint (2)'s relative slack, as the store's script allows it. */
const tolerance = 1e-9;

/** Held streams stay bound until after the failover, to check no acknowledged binding is lost. */
const held = (i: number) => i % 32 === 16;
/** Redelivered streams: their request and end also go to a second replica, at once or later. */
const redelivery = (i: number): 'racing' | 'late' | undefined =>
  i % 5 === 1 ? 'racing' : i % 5 === 3 ? 'late' : undefined;

/** A stream of load 10 (size 1) or 5 (size 0.5); held ones are small to leave room for the rest. */
const requestOf = (i: number): StreamRequest =>
  streamRequest.parse({
    id: `s-${i}`,
    scheduler: 'ap-0',
    task: 'object-detection',
    maxDelayMs: 200,
    minAccuracy: 30,
    rate: 10,
    size: held(i) || i % 3 === 0 ? 0.5 : 1,
    // Far beyond the test: no lease runs out, so only the ends release capacity.
    durationS: 3600,
  });

interface Replica {
  readonly scheduler: AsetScheduler;
  readonly store: BindingStore;
}

/** What the callers were told, per stream id, and the figures that follow from it. */
interface Ledger {
  readonly placements: Map<string, Placement[]>;
  /** Answers that were a new reservation (not a replay). */
  readonly fresh: Map<string, number>;
  readonly rejected: Map<string, number>;
  /** Ends that answered with the binding they released. */
  readonly released: Map<string, number>;
  readonly overCapacity: string[];
  /** Late redeliveries of a bound stream that were not answered with its binding. */
  readonly unfaithful: string[];
  /** Racing copies answered with a rejection while their twin was bound (see judge). */
  readonly racingRejected: string[];
  negativeLoads: number;
  operations: number;
}

const bump = (map: Map<string, number>, id: string) => map.set(id, (map.get(id) ?? 0) + 1);

/**
 * What a redelivered request's answers say together. A late copy (sent once the first was answered
 * bound) must be told the same binding. A racing copy that read no binding, then found the last
 * capacity taken by its own twin, is answered with a rejection: that reserves nothing, so it is
 * neither lost nor doubled, and it is only counted.
 */
function judge(i: number, answers: readonly RequestOutcome[], ledger: Ledger): void {
  const [first, second] = answers;
  if (first === undefined || second === undefined) return;
  if (redelivery(i) === 'late' && first.kind === 'bound' && second.kind !== 'bound') {
    ledger.unfaithful.push(`s-${i}: ${second.rejection.message}`);
  }
  if (redelivery(i) === 'racing' && first.kind !== second.kind)
    ledger.racingRejected.push(`s-${i}`);
}

/** Sends one call as a redelivered stream's two copies are sent, or once. */
async function copies<T>(i: number, send: (copy: number) => Promise<T>): Promise<T[]> {
  const again = redelivery(i);
  if (again === 'racing') return Promise.all([send(0), send(1)]);
  const first = await send(0);
  return again === 'late' ? [first, await send(1)] : [first];
}

/**
 * The calls the test makes, each as a function's caller makes it: to a replica chosen by the
 * stream and the copy, retried on a 503 as Knative redelivers, and written down in `ledger`.
 */
function driver(replicas: readonly Replica[], counter: { unavailable: number }) {
  const ledger: Ledger = {
    placements: new Map(),
    fresh: new Map(),
    rejected: new Map(),
    released: new Map(),
    overCapacity: [],
    unfaithful: [],
    racingRejected: [],
    negativeLoads: 0,
    operations: 0,
  };
  const replica = (i: number, copy: number) => replicas[(i + 3 * copy) % replicaCount]!;
  // Read right after a reservation, when the worker it went to is at its fullest.
  const sample = async (i: number) => {
    const loads = await retrying(() => replica(i, 0).store.loads(workerIndexes), counter);
    loads.forEach((load, w) => {
      const capacity = asetTopology.workers[w]!.capacity;
      if (load - capacity > tolerance * Math.max(load, capacity)) {
        ledger.overCapacity.push(`worker ${w}: ${load} > ${capacity} after s-${i}`);
      }
      if (load < 0) ledger.negativeLoads += 1;
    });
  };
  const bind = async (i: number): Promise<Placement | undefined> => {
    const request = requestOf(i);
    const answers = await copies(i, async (copy) => {
      ledger.operations += 1;
      const outcome = await retrying(() => replica(i, copy).scheduler.request(request), counter);
      if (outcome.kind === 'rejected') bump(ledger.rejected, request.id);
      else {
        const list = ledger.placements.get(request.id) ?? [];
        ledger.placements.set(request.id, [...list, outcome.placement]);
        if (!outcome.replay) bump(ledger.fresh, request.id);
        await sample(i);
      }
      return outcome;
    });
    judge(i, answers, ledger);
    const bound = answers.find((a) => a.kind === 'bound');
    return bound?.kind === 'bound' ? bound.placement : undefined;
  };
  const end = async (i: number): Promise<void> => {
    await copies(i, async (copy) => {
      ledger.operations += 1;
      const ended = await retrying(() => replica(i, copy).scheduler.end(`s-${i}`), counter);
      if (ended !== undefined) bump(ledger.released, `s-${i}`);
    });
  };
  /** The binding the store has for stream i, or undefined when it knows none. */
  const find = (i: number) =>
    retrying(
      () =>
        replica(i, 0)
          .scheduler.find(`s-${i}`)
          .catch((err: unknown) => {
            if (err instanceof NotFoundError) return undefined;
            throw err;
          }),
      counter,
    );
  return { ledger, bind, end, find };
}

/** Streams told two different placements, or reserved anew more than once, or released twice. */
function doubledIn(ledger: Ledger): string[] {
  const doubled: string[] = [];
  for (const [id, placements] of ledger.placements) {
    const workers = new Set(placements.map((p) => `${p.worker.index}@${p.expiresAt}`));
    if (workers.size > 1) doubled.push(`${id}: placed as ${[...workers].join(' and ')}`);
    else if ((ledger.fresh.get(id) ?? 0) > 1) doubled.push(`${id}: reserved twice`);
  }
  for (const [id, n] of ledger.released) if (n > 1) doubled.push(`${id}: released ${n} times`);
  return doubled;
}

/** Per worker, how many held streams are bound there and their load, as the callers were told. */
function expectedHeld(placements: ReadonlyMap<number, Placement>) {
  const expected = workerIndexes.map(() => ({ streams: 0, load: 0 }));
  for (const [i, placement] of placements) {
    const request = requestOf(i);
    expected[placement.worker.index]!.streams += 1;
    expected[placement.worker.index]!.load += request.rate * request.size;
  }
  return expected;
}

/** Held bindings the store lost (lost) or holds more of than were told (doubled). */
function compareHeld(status: SchedulerStatus, placements: ReadonlyMap<number, Placement>) {
  const expected = expectedHeld(placements);
  let missing = 0;
  let extra = 0;
  for (const worker of status.workers) {
    const told = expected[worker.index]!.streams;
    missing += Math.max(0, told - worker.streams);
    extra += Math.max(0, worker.streams - told);
  }
  return { expected, missing, extra };
}

/** One replica of the function: its own client, the keys every replica shares. */
async function startReplica(redis: FailoverRedis): Promise<Replica> {
  const store = createBindingStore(await redis.client(1), {
    topology: storeName,
    workers: asetTopology.workers.length,
    tombstoneMs: 600_000,
    dedupeSeconds: 3600,
  });
  const scheduler = createAsetScheduler({
    topology: asetTopology,
    store,
    controller: { name: 'fixed', choose: () => 'load-balancing' },
    // Windows roll during the run, so their writes fail over too.
    windowMs: 5_000,
    leaseGraceMs: 0,
    now: Date.now,
    uniform: Math.random,
  });
  return { scheduler, store };
}

describe.each<Topology>(['sentinel', 'cluster'])('aset-scheduler, %s failover', (topology) => {
  let redis: FailoverRedis;
  const replicas: Replica[] = [];

  beforeAll(async () => {
    redis = await startFailoverRedis(topology);
    for (let i = 0; i < replicaCount; i += 1) replicas.push(await startReplica(redis));
  }, 120_000);
  afterAll(() => redis?.stop());

  it('never over-reserves a worker and ends with every load back to 0', async () => {
    const counter = { unavailable: 0 };
    const failoversBefore = redis.failovers;
    const rng = seededRandom(20261125);
    const { ledger, bind, end, find } = driver(replicas, counter);
    const holding = new Map<number, Placement>();
    let failover: Promise<void> | undefined;
    // The hash all the store's scripts touch: its slot's master is the one to kill.
    const workersKey = key('aset', hashTag(`aset:${storeName}`), 'workers');
    await pool(
      streams,
      width,
      async (i) => {
        const placement = await bind(i);
        if (placement === undefined) return;
        if (held(i)) holding.set(i, placement);
        else {
          await new Promise((r) => setTimeout(r, rng() * 30));
          await end(i);
        }
      },
      (done) => {
        if (done === streams / 4) failover = redis.failover(workersKey);
      },
    );
    await failover;

    // After the failover, the held streams: each still bound where its caller was told.
    const during = await retrying(() => replicas[0]!.scheduler.status(), counter);
    const heldNow = compareHeld(during, holding);
    let unknown = 0;
    for (const [i, placement] of holding) {
      const found = await find(i);
      if (found?.worker.index !== placement.worker.index) unknown += 1;
    }
    for (const i of holding.keys()) await end(i);
    const after = await retrying(() => replicas[0]!.scheduler.status(), counter);
    const left = after.workers.reduce((n, w) => n + Math.max(0, w.streams), 0);
    const doubled = doubledIn(ledger);
    report({
      scenario: 'aset-scheduler: 8 replicas binding against capacity',
      topology,
      operations: ledger.operations,
      failovers: redis.failovers - failoversBefore,
      lost: Math.max(unknown, heldNow.missing) + Math.max(left, after.bindings),
      doubled: doubled.length + heldNow.extra + ledger.negativeLoads,
      unavailable: counter.unavailable,
    });
    // A redelivery racing its original may still be rejected where its own read found the
    // workers full before a release made room for the original: shown, not failed (see docs).
    if (ledger.racingRejected.length > 0) {
      console.log(`racing redeliveries rejected while bound: ${ledger.racingRejected.join(' ')}`);
    }
    expect(redis.failovers - failoversBefore).toBe(1);
    expect(ledger.overCapacity).toEqual([]);
    expect(doubled).toEqual([]);
    expect(ledger.unfaithful).toEqual([]);
    expect(unknown).toBe(0);
    expect(during.bindings).toBe(holding.size);
    expect(during.workers.map((w) => ({ streams: w.streams, load: w.load }))).toEqual(
      heldNow.expected,
    );
    expect(after.bindings).toBe(0);
    expect(after.workers.map((w) => [w.streams, w.load])).toEqual(workerIndexes.map(() => [0, 0]));
    expect(ledger.negativeLoads).toBe(0);
    // The run did race for capacity: some streams were turned away, most were bound.
    expect(ledger.rejected.size).toBeGreaterThan(0);
    expect(ledger.placements.size).toBeGreaterThan(streams / 3);
  }, 180_000);
});
