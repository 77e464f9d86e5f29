/**
 * The aset-scheduler's shared state in Redis: which worker each stream is bound to, the reserved
 * load L_w of every worker (constraint 2), the eq. (11) features the meta-policy reads, and the
 * policy in force for the current window of T. Every replica of the function reads and writes
 * the same keys, and every change is one Lua script, so two replicas can never both take the
 * last capacity of a worker, bind one stream twice, or roll one window twice.
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
import { defineIdempotentScript, hashTag, key, luaScript, runScript } from '../redis/index.js';
import type { Delivery, RedisClient } from '../redis/index.js';
import { LOAD, RESPONSES_PER_S, STREAMS, featuresPerWorker } from './observation.js';
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

// Fields of the workers hash: `<w>:v<f>` the current value of feature f of worker w, `<w>:i<f>`
// its integral (value x ms) since the window started, `<w>:t` when it was last advanced.
const prelude = `
local workers, bindings, expiry, ended, window = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local FEATURES, RESPONSES = ${featuresPerWorker}, ${RESPONSES_PER_S}
local tracked = {}
for f = 0, FEATURES - 1 do
  if f ~= RESPONSES then tracked[#tracked + 1] = f end
end
local function names(w, kind)
  local list = {}
  for i, f in ipairs(tracked) do list[i] = w .. ':' .. kind .. f end
  return list
end
-- Moves worker w's integrals up to now. A replica whose clock is behind the last advance adds
-- nothing, so the change lands at the later time instead of running time backwards.
local function integrate(w, now)
  local t = tonumber(redis.call('HGET', workers, w .. ':t'))
  if t ~= nil and now > t then
    local values = redis.call('HMGET', workers, unpack(names(w, 'v')))
    for i, v in ipairs(values) do
      if v then
        local x = tonumber(v)
        if x ~= 0 then
          redis.call('HINCRBYFLOAT', workers, w .. ':i' .. tracked[i], x * (now - t))
        end
      end
    end
  end
  if t == nil or now > t then redis.call('HSET', workers, w .. ':t', now) end
end
local function release(id, now, tombstoneUntil)
  -- An end is remembered even for a stream with no binding (its request still on its way, or
  -- retried after a failure): the request must not bind it afterwards.
  redis.call('ZADD', ended, tombstoneUntil, id)
  redis.call('ZREM', expiry, id)
  local text = redis.call('HGET', bindings, id)
  if not text then return nil end
  local r = cjson.decode(text)
  local w = r.worker
  integrate(w, now)
  local left = tonumber(redis.call('HINCRBYFLOAT', workers, w .. ':v${STREAMS}', -1))
  if left <= 0 then
    -- Nothing bound: zero the values exactly, so float residue of many +/- cannot build up.
    redis.call('HDEL', workers, unpack(names(w, 'v')))
  else
    redis.call('HINCRBYFLOAT', workers, w .. ':v${LOAD}', '-' .. r.delta)
    redis.call('HINCRBYFLOAT', workers, w .. ':v' .. r.cell, '-' .. r.rate)
  end
  redis.call('HDEL', bindings, id)
  return text
end
`;

const reserveLua = `${prelude}
local id, record, now = ARGV[1], ARGV[2], tonumber(ARGV[3])
local w, delta, rate, cell = ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local capacity, tolerance, expiresAt = ARGV[8], tonumber(ARGV[9]), ARGV[10]
local existing = redis.call('HGET', bindings, id)
if existing then return {'exists', existing} end
if redis.call('ZSCORE', ended, id) then return {'ended'} end
local load = tonumber(redis.call('HGET', workers, w .. ':v${LOAD}') or '0')
if capacity ~= 'inf' then
  -- Constraint (2) with the relative slack of constraints.ts's atMost.
  local value, bound = load + tonumber(delta), tonumber(capacity)
  if value > bound and value - bound > tolerance * math.max(math.abs(value), math.abs(bound)) then
    return {'full', tostring(load)}
  end
end
integrate(w, now)
redis.call('HINCRBYFLOAT', workers, w .. ':v${STREAMS}', 1)
redis.call('HINCRBYFLOAT', workers, w .. ':v${LOAD}', delta)
redis.call('HINCRBYFLOAT', workers, w .. ':v' .. cell, rate)
redis.call('HSET', bindings, id, record)
redis.call('ZADD', expiry, expiresAt, id)
return {'bound'}
`;

const releaseLua = `${prelude}
local text = release(ARGV[1], tonumber(ARGV[2]), ARGV[3])
if text then return text end
return false
`;

const sweepLua = `${prelude}
local now, limit, tombstoneUntil = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
redis.call('ZREMRANGEBYSCORE', ended, '-inf', now)
local due = redis.call('ZRANGEBYSCORE', expiry, '-inf', now, 'LIMIT', 0, limit)
for _, id in ipairs(due) do release(id, now, tombstoneUntil) end
return #due
`;

const windowLua = `${prelude}
local now, span, count = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
-- Times are stored and returned as the caller's strings: setPolicy compares them as text.
local stored = redis.call('HGET', window, 'start')
local start = tonumber(stored)
local policy = redis.call('HGET', window, 'policy')
if start == nil then
  redis.call('HSET', window, 'start', ARGV[1])
  redis.call('HDEL', window, 'policy')
  return {'started', ARGV[1]}
end
if now - start < span then return {'current', stored, policy} end
local elapsed = now - start
local out = {'rolled', stored, ARGV[1], policy}
for w = 0, count - 1 do
  integrate(w, now)
  local integrals = redis.call('HMGET', workers, unpack(names(w, 'i')))
  local responses = tonumber(redis.call('HGET', window, 'r:' .. w) or '0')
  local k = 1
  for f = 0, FEATURES - 1 do
    if f == RESPONSES then
      out[#out + 1] = tostring(responses * 1000 / elapsed)
    else
      out[#out + 1] = tostring(tonumber(integrals[k] or '0') / elapsed)
      k = k + 1
    end
  end
  redis.call('HDEL', workers, unpack(names(w, 'i')))
  redis.call('HDEL', window, 'r:' .. w)
end
redis.call('HSET', window, 'start', ARGV[1])
return out
`;

const setPolicyLua = `
if redis.call('HGET', KEYS[1], 'start') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'policy', ARGV[2])
return 1
`;

const responsesLua = `
for i = 1, #ARGV, 2 do
  redis.call('HINCRBYFLOAT', KEYS[1], 'r:' .. ARGV[i], ARGV[i + 1])
end
return 1
`;

const reserveScript = luaScript(5, reserveLua);
const releaseScript = luaScript(5, releaseLua);
const sweepScript = luaScript(5, sweepLua);
const windowScript = luaScript(5, windowLua);
const setPolicyScript = luaScript(1, setPolicyLua);

/** Relative slack of constraint (2), as constraints.ts's RELATIVE_TOLERANCE. */
const TOLERANCE = 1e-9;

const isPolicy = (value: unknown): value is PolicyName =>
  typeof value === 'string' && (policyNames as readonly string[]).includes(value);

/** What the store's operations share: the client, the topology's keys and its settings. */
interface StoreDeps {
  readonly redis: RedisClient;
  /** KEYS of every script built on the prelude, in its order. */
  readonly keys: readonly string[];
  readonly workersKey: string;
  readonly bindingsKey: string;
  readonly windowKey: string;
  /** How long an ended stream's id stays refused. */
  readonly tombstoneMs: number;
  /** How many workers the topology has (the window's feature rows). */
  readonly workers: number;
}

// Each operation calls runScript itself, with `deps` the one const createBindingStore builds:
// the slot check (test/support/script-slots.ts) follows a script's keys through one call only.

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
  const reply = (await runScript(deps.redis, reserveScript, [...deps.keys, ...args], (r) => r)) as [
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
  const text = await runScript(deps.redis, releaseScript, [...deps.keys, ...args], (r) => r);
  return text === null ? undefined : parseRecord(text);
}

async function sweepExpired(
  deps: Pick<StoreDeps, 'redis' | 'keys' | 'tombstoneMs'>,
  nowMs: number,
  limit: number,
): Promise<number> {
  const args = [String(nowMs), String(limit), String(nowMs + deps.tombstoneMs)];
  return Number(await runScript(deps.redis, sweepScript, [...deps.keys, ...args], (r) => r));
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
    windowScript,
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
  return Number(await runScript(deps.redis, setPolicyScript, keysAndArgs, (r) => r)) === 1;
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
  const responses = defineIdempotentScript(redis, 'aset-responses', {
    keys: 1,
    lua: responsesLua,
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
    // Here, not beside the others: the slot check follows `responses` only where it is called.
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
