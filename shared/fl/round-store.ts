/**
 * A federated job's rounds in Redis, shared by whatever aggregator process runs the job (a
 * restarted one, a second replica). One Lua script per change (lua/*.lua), so the guarantees
 * hold across crashes and retries: an update counts at most once, one for another round or base
 * version is refused with the reason, a round is aggregated by one claim holder at a time (a
 * lease a dead aggregator leaves to run out), and its commit — new model version, history entry,
 * next round — happens once, all at once. The updates stay stored until that commit, so an
 * aggregator killed mid-aggregation loses none of them.
 */
import { randomInt } from 'node:crypto';
import { hashTag, key, runScript } from '../redis/index.js';
import type { RedisClient } from '../redis/index.js';
import { claim, commit, evaluated, offer, open } from './lua/index.js';

const statuses = ['open', 'aggregating', 'done', 'failed'] as const;
type RoundStatus = (typeof statuses)[number];

/** Where the job stands, as open.lua documents it. */
interface RoundState {
  status: RoundStatus;
  round: number;
  /** The model version the open round trains from. */
  base: number;
  /** The latest model version, and its sha256. */
  version: number;
  sha: string;
  selected: string[];
  quorum: number;
  /** Updates accepted for the open round. */
  n: number;
  openedMs: number;
  deadlineMs: number;
  /** Why the job ended (done or failed). */
  message?: string;
}

const refusals = [
  'unknown-job',
  'finished',
  'late',
  'future',
  'closed',
  'stale-base',
  'not-selected',
  'buffered',
] as const;
type Refusal = (typeof refusals)[number];

type OfferOutcome =
  | { kind: 'accepted'; n: number; quorum: number; selected: number; round: number }
  | { kind: 'duplicate'; n: number }
  | { kind: 'refused'; reason: Refusal; detail: string };

type ClaimOutcome =
  | { kind: 'claimed'; closedBy: 'all' | 'quorum' | 'deadline'; n: number }
  | { kind: 'waiting'; n: number; quorum: number; deadlineMs: number }
  | { kind: 'busy'; untilMs: number }
  | { kind: 'stale'; round: number }
  | { kind: 'finished'; status: RoundStatus };

/** One accepted update as stored: its metadata (JSON, the caller's schema) and its weights. */
interface StoredUpdate {
  worker: string;
  meta: string;
  weights: Buffer;
}

/** What the store knows of one worker: its updates, and its last reported failure. */
interface WorkerRecord {
  accepted: number;
  refused: number;
  /** The last round it had an update accepted for (0: none). */
  lastRound: number;
  /** When it last sent anything (ms; 0: never). */
  lastSeenMs: number;
  failure?: { atMs: number; round: number; exitCode: number; message: string };
}

/** The next round (or the same one again), as commit.lua opens it. */
interface NextRound {
  selected: readonly string[];
  quorum: number;
  nowMs: number;
  deadlineMs: number;
}

type Commit = { round: number; token: string; summary?: string } & (
  | ({ outcome: 'next'; version: number; sha: string } & NextRound)
  | ({ outcome: 'retry' } & NextRound)
  | { outcome: 'done'; version: number; sha: string; nowMs: number; message: string }
  | { outcome: 'failed'; nowMs: number; message: string }
);

interface RoundStore {
  /** Starts round 1 from model version 0 (stored first), or returns the state found. */
  open(first: NextRound & { sha: string }): Promise<{ created: boolean; state: RoundState }>;
  state(): Promise<RoundState | undefined>;
  offer(update: {
    round: number;
    worker: string;
    base: number;
    meta: string;
    weights: Buffer;
    nowMs: number;
    /** Asynchronous (FedBuff) rounds: how many versions behind the base an update may be. */
    maxStaleness?: number;
  }): Promise<OfferOutcome>;
  claim(round: number, token: string, nowMs: number, leaseMs: number): Promise<ClaimOutcome>;
  /**
   * The open (or claimed) round's updates, by worker name; the weights of the workers in
   * `known` are not read (empty: the caller holds them already).
   */
  updates(known?: ReadonlySet<string>): Promise<StoredUpdate[]>;
  /** False when the claim was not this token's to commit (taken over, or committed already). */
  commit(change: Commit): Promise<boolean>;
  saveModel(version: number, bytes: Uint8Array): Promise<void>;
  model(version: number): Promise<Buffer | undefined>;
  /** Drops a stored model version (one no round trains from and no one serves any more). */
  dropModel(version: number): Promise<void>;
  /**
   * What the strategy carried out of the round that made `version` (a server optimizer's
   * moments), saved before that round commits, as its model is.
   */
  saveStrategyState(version: number, text: string): Promise<void>;
  strategyState(version: number): Promise<string | undefined>;
  /**
   * The job's secret seed (central DP's noise), drawn by the first aggregator to ask and the same
   * for every later one: a round aggregated again after a crash adds the same noise.
   */
  secretSeed(): Promise<number>;
  /** Round summaries (JSON, as committed), newest first. */
  history(): Promise<string[]>;
  /**
   * Replaces round `round`'s history entry by `patch` of it (its evaluation, measured after the
   * round committed); false when the capped history holds no entry for that round any more.
   */
  patchHistory(round: number, patch: (entry: string) => string): Promise<boolean>;
  /** The workers whose update the open (or claimed) round holds. */
  submitted(): Promise<string[]>;
  workers(): Promise<Map<string, WorkerRecord>>;
  /** Records a worker's failure (its latest replaces the one before). */
  recordFailure(
    worker: string,
    failure: { atMs: number; round: number; exitCode: number; message: string },
  ): Promise<void>;
}

const jobName = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?\/[a-z0-9]([-a-z0-9.]*[a-z0-9])?\/[-a-z0-9]*$/;
const historyKept = 20;

function fields(flat: readonly unknown[]): Map<string, string> {
  const map = new Map<string, string>();
  for (let i = 0; i + 1 < flat.length; i += 2) map.set(String(flat[i]), String(flat[i + 1]));
  return map;
}

function parseState(map: ReadonlyMap<string, string>): RoundState | undefined {
  const status = map.get('status');
  if (!statuses.some((s) => s === status)) return undefined;
  const num = (name: string) => Number(map.get(name) ?? 0);
  const message = map.get('message');
  return {
    status: status as RoundStatus,
    round: num('round'),
    base: num('base'),
    version: num('version'),
    sha: map.get('sha') ?? '',
    selected: JSON.parse(map.get('selected') ?? '[]') as string[],
    quorum: num('quorum'),
    n: num('n'),
    openedMs: num('opened'),
    deadlineMs: num('deadline'),
    ...(message === undefined ? {} : { message }),
  };
}

function offerOutcome(reply: unknown): OfferOutcome {
  const [kind, a, b, c, d] = reply as [string, unknown, unknown, unknown, unknown];
  if (kind === 'accepted')
    return { kind, n: Number(a), quorum: Number(b), selected: Number(c), round: Number(d) };
  if (kind === 'duplicate') return { kind, n: Number(a) };
  return { kind: 'refused', reason: String(a) as Refusal, detail: String(b) };
}

function claimOutcome(reply: unknown): ClaimOutcome {
  const [kind, a, b, c] = reply as [string, unknown, unknown, unknown];
  switch (kind) {
    case 'claimed':
      return { kind, closedBy: String(a) as 'all' | 'quorum' | 'deadline', n: Number(b) };
    case 'waiting':
      return { kind, n: Number(a), quorum: Number(b), deadlineMs: Number(c) };
    case 'busy':
      return { kind, untilMs: Number(a) };
    case 'finished':
      return { kind, status: String(a) as RoundStatus };
    default:
      return { kind: 'stale', round: Number(a) };
  }
}

/** commit.lua's ARGV for `change`. */
function commitArgs(change: Commit): Array<string | number> {
  const next = 'selected' in change ? change : undefined;
  const version = 'version' in change ? change.version : '';
  const sha = 'sha' in change ? change.sha : '';
  return [
    change.round,
    change.token,
    change.outcome,
    version,
    sha,
    change.summary ?? '',
    JSON.stringify(next?.selected ?? []),
    next?.quorum ?? 0,
    change.nowMs,
    next?.deadlineMs ?? 0,
    'message' in change ? change.message : '',
    historyKept,
  ];
}

function workerRecords(flat: Record<string, string>): Map<string, WorkerRecord> {
  const fieldsOf = new Map<string, Map<string, string>>();
  for (const [field, value] of Object.entries(flat)) {
    const at = field.lastIndexOf(':');
    const worker = field.slice(0, at);
    let own = fieldsOf.get(worker);
    if (own === undefined) fieldsOf.set(worker, (own = new Map<string, string>()));
    own.set(field.slice(at + 1), value);
  }
  const records = new Map<string, WorkerRecord>();
  for (const [worker, own] of [...fieldsOf].sort(([a], [b]) => (a < b ? -1 : 1))) {
    const num = (name: string) => Number(own.get(name) ?? 0);
    const failedAt = own.get('failedAt');
    records.set(worker, {
      accepted: num('accepted'),
      refused: num('refused'),
      lastRound: num('lastRound'),
      lastSeenMs: num('lastSeen'),
      ...(failedAt === undefined
        ? {}
        : {
            failure: {
              atMs: Number(failedAt),
              round: num('failedRound'),
              exitCode: num('exitCode'),
              message: own.get('failMessage') ?? '',
            },
          }),
    });
  }
  return records;
}

type StoreKeys = ReturnType<typeof storeKeys>;

/** The round a history entry is of (undefined: not an entry this store wrote). */
function roundOf(entry: string): number | undefined {
  try {
    const { round } = JSON.parse(entry) as { round?: unknown };
    return typeof round === 'number' ? round : undefined;
  } catch {
    return undefined;
  }
}

function storeKeys(job: string) {
  const tag = hashTag(`fl:${job}`);
  return {
    state: key('fl', tag, 'state'),
    round: key('fl', tag, 'round'),
    workers: key('fl', tag, 'workers'),
    history: key('fl', tag, 'history'),
    model: (version: number) => key('fl', tag, 'model', String(version)),
    strategy: (version: number) => key('fl', tag, 'strategy', String(version)),
    seed: key('fl', tag, 'seed'),
  };
}

const text = (values: ReadonlyArray<string | number>) => values.map(String);

/** The changes that take a script (lua/): the guarantees of this file. */
function scripted(
  redis: RedisClient,
  keys: StoreKeys,
  job: string,
): Pick<RoundStore, 'open' | 'offer' | 'claim' | 'commit' | 'patchHistory'> {
  return {
    async open(first) {
      const args = [JSON.stringify(first.selected), first.quorum, first.nowMs, first.deadlineMs];
      return runScript(redis, open, [keys.state, ...text([...args, first.sha])], (reply) => {
        const [kind, flat] = reply as [string, unknown[]];
        const state = parseState(fields(flat));
        if (state === undefined) throw new Error(`open.lua: no state for ${job}`);
        return { created: kind === 'created', state };
      });
    },
    offer(update) {
      const args = [update.round, update.worker, update.base, update.meta];
      return runScript(
        redis,
        offer,
        [
          keys.state,
          keys.round,
          keys.workers,
          ...text(args),
          update.weights,
          String(update.nowMs),
          update.maxStaleness === undefined ? '' : String(update.maxStaleness),
        ],
        offerOutcome,
      );
    },
    claim(round, token, nowMs, leaseMs) {
      const args = text([round, token, nowMs, leaseMs]);
      return runScript(redis, claim, [keys.state, ...args], claimOutcome);
    },
    async commit(change) {
      const argv = [keys.state, keys.round, keys.history, ...text(commitArgs(change))];
      return runScript(redis, commit, argv, (reply) => (reply as [string])[0] === 'committed');
    },
    async patchHistory(round, patch) {
      // Compare-and-set on the entry read: a commit that pushed an entry meanwhile moved it.
      for (;;) {
        const entries = await redis.lrange(keys.history, 0, -1);
        const index = entries.findIndex((e) => roundOf(e) === round);
        if (index < 0) return false;
        const expected = entries[index]!;
        const argv = [keys.history, String(index), expected, patch(expected)];
        if (await runScript(redis, evaluated, argv, (reply) => reply === 1)) return true;
      }
    },
  };
}

/** Reads, model bytes and failure records: single commands, nothing to keep atomic. */
function plain(
  redis: RedisClient,
  keys: StoreKeys,
): Omit<RoundStore, 'open' | 'offer' | 'claim' | 'commit' | 'patchHistory'> {
  return {
    async state() {
      return parseState(new Map(Object.entries(await redis.hgetall(keys.state))));
    },
    async updates(known = new Set<string>()) {
      const workers = (await redis.hkeys(keys.round))
        .filter((field) => field.startsWith('m:'))
        .map((field) => field.slice(2))
        .sort();
      if (workers.length === 0) return [];
      const fieldsOf = workers.flatMap((w) => (known.has(w) ? [`m:${w}`] : [`m:${w}`, `w:${w}`]));
      const values = await redis.hmgetBuffer(keys.round, ...fieldsOf);
      const byField = new Map(fieldsOf.map((f, i) => [f, values[i] ?? null]));
      return workers.map((worker) => ({
        worker,
        meta: String(byField.get(`m:${worker}`) ?? '{}'),
        weights: byField.get(`w:${worker}`) ?? Buffer.alloc(0),
      }));
    },
    async saveModel(version, bytes) {
      const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length);
      await redis.set(keys.model(version), buffer);
    },
    async model(version) {
      return (await redis.getBuffer(keys.model(version))) ?? undefined;
    },
    async dropModel(version) {
      await redis.unlink(keys.model(version), keys.strategy(version));
    },
    async saveStrategyState(version, text) {
      await redis.set(keys.strategy(version), text);
    },
    async strategyState(version) {
      return (await redis.get(keys.strategy(version))) ?? undefined;
    },
    async secretSeed() {
      await redis.set(keys.seed, String(randomInt(2 ** 31)), 'NX');
      return Number(await redis.get(keys.seed));
    },
    history: () => redis.lrange(keys.history, 0, -1),
    async submitted() {
      const names = await redis.hkeys(keys.round);
      return names
        .filter((f) => f.startsWith('m:'))
        .map((f) => f.slice(2))
        .sort();
    },
    async workers() {
      return workerRecords(await redis.hgetall(keys.workers));
    },
    async recordFailure(worker, failure) {
      await redis.hset(keys.workers, {
        [`${worker}:failedAt`]: String(failure.atMs),
        [`${worker}:failedRound`]: String(failure.round),
        [`${worker}:exitCode`]: String(failure.exitCode),
        [`${worker}:failMessage`]: failure.message,
      });
    },
  };
}

/**
 * The store of job `job` (`<namespace>/<name>/<uid>`: a job deleted and created again under its
 * name is a new one, and starts from round 1).
 */
function createRoundStore(redis: RedisClient, job: string): RoundStore {
  if (!jobName.test(job)) throw new Error(`federated job id "${job}" is not <ns>/<name>/<uid>`);
  const keys = storeKeys(job);
  return { ...scripted(redis, keys, job), ...plain(redis, keys) };
}

export { createRoundStore, refusals };
export type { RoundStore, RoundState, OfferOutcome, ClaimOutcome };
