/**
 * The aset-scheduler's shared state in Redis: which worker each stream is bound to, the reserved
 * load L_w of every worker (constraint 2), the eq. (11) features the meta-policy reads, and the
 * policy in force for the current window of T. Every replica of the function reads and writes
 * the same keys, and every change is one Lua script (lua/), so two replicas can never both take
 * the last capacity of a worker, bind one stream twice, or roll one window twice.
 *
 * The features are averaged over time, as the simulator's once-a-second samples average them:
 * each worker keeps the integral of every feature since the window started, advanced whenever
 * the feature changes (a bind or a release) and when the window rolls. Responses per second come
 * from the clusters' monitoring reports, counted over the window.
 *
 * A binding is a lease: it ends when the stream says so or when its declared duration (plus a
 * grace) has passed, whichever is first, so a client that vanishes cannot hold capacity for ever.
 * An ended stream's id stays refused for a while (a tombstone), so a late redelivery of its
 * request cannot bind it again.
 */
import { defineIdempotentScript, hashTag, key, runScript } from '../redis/index.js';
import type { Delivery, RedisClient } from '../redis/index.js';
import * as lua from './lua/index.js';
import { LOAD, STREAMS } from './observation.js';
import { policyNames } from './types.js';
import type { PolicyName } from './types.js';

/** What is stored for a bound stream; `delta` and `rate` are kept as the strings added. */
interface BindingRecord {
  readonly id: string;
  readonly worker: number;
  readonly scheduler: string;
  readonly policy: PolicyName;
  /** sha256 of the request, so a reused id with another request is told apart from a retry. */
  readonly fingerprint: string;
  /** zeta_i * rho_i, the load reserved on the worker. */
  readonly delta: string;
  readonly rate: string;
  /** Offset of the stream's (deadline, rate) cell in the worker's feature row. */
  readonly cell: number;
  readonly expectedMs: number;
  readonly boundAtMs: number;
  readonly expiresAtMs: number;
}

type ReserveOutcome =
  | { kind: 'bound' }
  | { kind: 'exists'; record: BindingRecord }
  | { kind: 'ended' }
  /** The worker's load moved since it was read: decide again. */
  | { kind: 'full'; load: number };

/** The window of T the scheduler is in, and what a roll produced. */
type WindowOutcome =
  /** Within the window: the policy in force (undefined until the first choice is stored). */
  | { kind: 'current'; startMs: number; policy: PolicyName | undefined }
  /** No window existed: this call started the first one. */
  | { kind: 'started'; startMs: number }
  /** This call ended the window [startMs, endMs): its time-averaged features, worker-major. */
  | {
      kind: 'rolled';
      startMs: number;
      endMs: number;
      policy: PolicyName | undefined;
      features: Float32Array;
    };

interface BindingStore {
  /** Binds `record` if the worker can still take `record.delta` within `capacity`. */
  reserve(record: BindingRecord, capacity: number, nowMs: number): Promise<ReserveOutcome>;
  find(id: string): Promise<BindingRecord | undefined>;
  /** Ends a binding; undefined when there was none (already ended, or never bound). */
  release(id: string, nowMs: number): Promise<BindingRecord | undefined>;
  /** Ends up to `limit` bindings whose lease has run out; says how many. */
  sweep(nowMs: number, limit: number): Promise<number>;
  /** Reserved load of each worker in `workers`, in that order. */
  loads(workers: readonly number[]): Promise<Float64Array>;
  /** Rolls the window when `windowMs` has passed since it started (one caller wins). */
  window(nowMs: number, windowMs: number): Promise<WindowOutcome>;
  /** Stores the policy chosen for the window that started at `startMs`, unless it rolled again. */
  setPolicy(startMs: number, policy: PolicyName): Promise<boolean>;
  /** Adds delivered responses per worker, once per delivery; says whether it applied. */
  addResponses(
    delivery: Omit<Delivery, 'tag'>,
    counts: ReadonlyArray<{ worker: number; responses: number }>,
  ): Promise<boolean>;
  /** Streams and load per worker, bindings held, the window: for the status route. */
  snapshot(): Promise<{
    streams: Float64Array;
    load: Float64Array;
    bindings: number;
    windowStartMs: number | undefined;
    policy: PolicyName | undefined;
  }>;
}

/** Relative slack of constraint (2), as constraints.ts's RELATIVE_TOLERANCE. */
const TOLERANCE = 1e-9;

const isPolicy = (value: unknown): value is PolicyName =>
  typeof value === 'string' && (policyNames as readonly string[]).includes(value);

/** What the store's operations share: the client, the topology's keys and its settings. */
interface StoreDeps {
  readonly redis: RedisClient;
  /** KEYS of every script built on lua/includes/prelude.lua, in its order. */
  readonly keys: readonly string[];
  readonly workersKey: string;
  readonly bindingsKey: string;
  readonly windowKey: string;
  /** How long an ended stream's id stays refused. */
  readonly tombstoneMs: number;
  /** How many workers the topology has (the window's feature rows). */
  readonly workers: number;
}

const parseRecord = (text: unknown): BindingRecord => JSON.parse(String(text)) as BindingRecord;

async function reserveBinding(
  deps: Pick<StoreDeps, 'redis' | 'keys'>,
  record: BindingRecord,
  capacity: number,
  nowMs: number,
): Promise<ReserveOutcome> {
  const args = [
    record.id,
    JSON.stringify(record),
    String(nowMs),
    String(record.worker),
    record.delta,
    record.rate,
    String(record.cell),
    Number.isFinite(capacity) ? String(capacity) : 'inf',
    String(TOLERANCE),
    String(record.expiresAtMs),
  ];
  const reply = (await runScript(deps.redis, lua.reserve, [...deps.keys, ...args], (r) => r)) as [
    string,
    string?,
  ];
  if (reply[0] === 'bound') return { kind: 'bound' };
  if (reply[0] === 'exists') return { kind: 'exists', record: parseRecord(reply[1]) };
  if (reply[0] === 'ended') return { kind: 'ended' };
  return { kind: 'full', load: Number(reply[1]) };
}

async function findBinding(
  deps: Pick<StoreDeps, 'redis' | 'bindingsKey'>,
  id: string,
): Promise<BindingRecord | undefined> {
  const text = await deps.redis.hget(deps.bindingsKey, id);
  return text === null ? undefined : parseRecord(text);
}

async function releaseBinding(
  deps: Pick<StoreDeps, 'redis' | 'keys' | 'tombstoneMs'>,
  id: string,
  nowMs: number,
): Promise<BindingRecord | undefined> {
  const args = [id, String(nowMs), String(nowMs + deps.tombstoneMs)];
  const text = await runScript(deps.redis, lua.release, [...deps.keys, ...args], (r) => r);
  return text === null ? undefined : parseRecord(text);
}

async function sweepExpired(
  deps: Pick<StoreDeps, 'redis' | 'keys' | 'tombstoneMs'>,
  nowMs: number,
  limit: number,
): Promise<number> {
  const args = [String(nowMs), String(limit), String(nowMs + deps.tombstoneMs)];
  return Number(await runScript(deps.redis, lua.sweep, [...deps.keys, ...args], (r) => r));
}

async function readLoads(
  deps: Pick<StoreDeps, 'redis' | 'workersKey'>,
  workers: readonly number[],
): Promise<Float64Array> {
  const out = new Float64Array(workers.length);
  if (workers.length === 0) return out;
  const values = await deps.redis.hmget(deps.workersKey, ...workers.map((w) => `${w}:v${LOAD}`));
  values.forEach((v, i) => (out[i] = v === null ? 0 : Number(v)));
  return out;
}

async function rollWindow(
  deps: Pick<StoreDeps, 'redis' | 'keys' | 'workers'>,
  nowMs: number,
  windowMs: number,
): Promise<WindowOutcome> {
  const args = [String(nowMs), String(windowMs), String(deps.workers)];
  const reply = (await runScript(
    deps.redis,
    lua.rollWindow,
    [...deps.keys, ...args],
    (r) => r,
  )) as Array<string | null>;
  const policyOf = (value: string | null | undefined) => (isPolicy(value) ? value : undefined);
  if (reply[0] === 'started') return { kind: 'started', startMs: Number(reply[1]) };
  if (reply[0] === 'current') {
    return { kind: 'current', startMs: Number(reply[1]), policy: policyOf(reply[2]) };
  }
  return {
    kind: 'rolled',
    startMs: Number(reply[1]),
    endMs: Number(reply[2]),
    policy: policyOf(reply[3]),
    features: Float32Array.from(reply.slice(4), Number),
  };
}

async function storePolicy(
  deps: Pick<StoreDeps, 'redis' | 'windowKey'>,
  startMs: number,
  policy: PolicyName,
): Promise<boolean> {
  const keysAndArgs = [deps.windowKey, String(startMs), policy];
  return Number(await runScript(deps.redis, lua.setPolicy, keysAndArgs, (r) => r)) === 1;
}

async function readSnapshot(
  deps: Pick<StoreDeps, 'redis' | 'workersKey' | 'bindingsKey' | 'windowKey' | 'workers'>,
): ReturnType<BindingStore['snapshot']> {
  const { redis, workers } = deps;
  const fields: string[] = [];
  for (let w = 0; w < workers; w += 1) fields.push(`${w}:v${STREAMS}`, `${w}:v${LOAD}`);
  const [values, bindings, window] = await Promise.all([
    fields.length === 0 ? Promise.resolve([]) : redis.hmget(deps.workersKey, ...fields),
    redis.hlen(deps.bindingsKey),
    redis.hmget(deps.windowKey, 'start', 'policy'),
  ]);
  const streams = new Float64Array(workers);
  const load = new Float64Array(workers);
  for (let w = 0; w < workers; w += 1) {
    streams[w] = Number(values[2 * w] ?? 0);
    load[w] = Number(values[2 * w + 1] ?? 0);
  }
  const [start, policy] = window;
  return {
    streams,
    load,
    bindings,
    windowStartMs: start === null || start === undefined ? undefined : Number(start),
    policy: isPolicy(policy) ? policy : undefined,
  };
}

/**
 * The store for one topology's scheduler. `tombstoneMs`: how long an ended stream's id stays
 * refused; `workers`: how many workers the topology has (the window's feature rows).
 */
function createBindingStore(
  redis: RedisClient,
  options: { topology: string; workers: number; tombstoneMs: number; dedupeSeconds: number },
): BindingStore {
  const tag = `aset:${options.topology}`;
  const t = hashTag(tag);
  const keys = [
    key('aset', t, 'workers'),
    key('aset', t, 'bindings'),
    key('aset', t, 'expiry'),
    key('aset', t, 'ended'),
    key('aset', t, 'window'),
  ];
  const [workersKey, bindingsKey, , , windowKey] = keys as [string, string, string, string, string];
  const responses = defineIdempotentScript(redis, lua.addResponses, {
    ttlSeconds: options.dedupeSeconds,
  });
  const { tombstoneMs, workers } = options;
  const deps: StoreDeps = { redis, keys, workersKey, bindingsKey, windowKey, tombstoneMs, workers };
  return {
    reserve: (record, capacity, nowMs) => reserveBinding(deps, record, capacity, nowMs),
    find: (id) => findBinding(deps, id),
    release: (id, nowMs) => releaseBinding(deps, id, nowMs),
    sweep: (nowMs, limit) => sweepExpired(deps, nowMs, limit),
    loads: (ids) => readLoads(deps, ids),
    window: (nowMs, windowMs) => rollWindow(deps, nowMs, windowMs),
    setPolicy: (startMs, policy) => storePolicy(deps, startMs, policy),
    async addResponses(delivery, counts) {
      const args = counts.flatMap(({ worker, responses: n }) => [String(worker), String(n)]);
      const outcome = await responses({ ...delivery, tag }, [windowKey], args);
      return outcome.applied;
    },
    snapshot: () => readSnapshot(deps),
  };
}

export { createBindingStore };
export type { BindingStore, BindingRecord, ReserveOutcome, WindowOutcome };
