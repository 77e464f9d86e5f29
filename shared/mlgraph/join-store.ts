/**
 * A joiner node's buffers in Redis, shared by its replicas. Each transaction (prediction id)
 * collects one input per source. Every input carries `pending`, an upper bound on how many more
 * inputs may still arrive for the transaction as its path saw it, so `received + pending` bounds
 * the total; the join keeps the tightest bound and completes on the input that reaches it. A
 * transaction still open at its deadline is handed out as an explicit partial.
 *
 * One Lua script per change (lua/join-*.lua): an input resent by its source is not counted
 * twice, the input that completes a join is the only one answered with the result (and again if
 * that source resends it), and an input arriving after the join has ended is reported late
 * rather than reopening it.
 */
import { randomUUID } from 'node:crypto';
import { hashTag, key, runScript } from '../redis/index.js';
import type { RedisClient } from '../redis/index.js';
import { joinAdd, joinClaim, joinDue, joinFinish, joinTighten } from './lua/index.js';

type JoinState = 'open' | 'closing' | 'complete' | 'partial';

/** A transaction's inputs by source, with how many the tightest bound still allowed for. */
interface Joined {
  readonly puid: string;
  readonly state: JoinState;
  /** Each input's JSON text as it was sent, by source, in source-name order. */
  readonly texts: ReadonlyArray<readonly [source: string, json: string]>;
  /** The same, parsed (when read). */
  readonly inputs: Readonly<Record<string, unknown>>;
  /** Inputs the bound still allowed for when the join ended (0 when complete). */
  readonly missing: number;
}

type AddOutcome =
  | { kind: 'complete'; joined: Joined }
  /** The completing source resent its input: the same result again. */
  | { kind: 'again'; joined: Joined }
  | { kind: 'waiting' }
  | { kind: 'late'; state: JoinState };

type StoreInput = { puid: string; source: string; pending: number; nowMs: number } & (
  { json: string } | { payload: unknown }
);

interface JoinStore {
  /**
   * `json` is the input's JSON text, kept as it is (the joined answer splices it in); or a
   * `payload` value, kept as JSON.
   */
  add(input: StoreInput): Promise<AddOutcome>;
  /**
   * Claims up to `limit` joins past their deadline for this caller: each is frozen (inputs that
   * arrive from now on are late) and held for `leaseMs`; `expired` counts overdue joins whose
   * key had expired before anyone handed them out.
   */
  due(
    nowMs: number,
    limit: number,
  ): Promise<{ claimed: Array<Joined & { claim: string }>; expired: number }>;
  /**
   * Lowers a transaction's bound to `inputs` in all, without an input of its own (a route not
   * taken after the inputs went); completes it when that many have arrived. The bound is kept
   * even before any input, which may still be on its way.
   */
  tighten(input: { puid: string; inputs: number }): Promise<AddOutcome>;
  /** Marks a claimed join as handed out; false when the claim was lost (its lease ran out). */
  finish(puid: string, claim: string): Promise<boolean>;
  get(puid: string): Promise<Joined | undefined>;
}

/** A stored input: JSON, as written; a field that is not (never written so) is kept as text. */
function inputOf(value: string): unknown {
  try {
    return JSON.parse(value) as unknown;
  } catch {
    return value;
  }
}

function joinedFrom(puid: string, flat: readonly string[]): Joined {
  const fields = new Map<string, string>();
  for (let i = 0; i + 1 < flat.length; i += 2) fields.set(flat[i]!, flat[i + 1]!);
  const texts: Array<readonly [string, string]> = [];
  for (const [field, value] of [...fields].sort(([a], [b]) => (a < b ? -1 : 1))) {
    if (field.startsWith('in:')) texts.push([field.slice(3), value]);
  }
  const state = (fields.get('state') ?? 'open') as JoinState;
  const received = Number(fields.get('n') ?? 0);
  const bound = Number(fields.get('bound') ?? received);
  let inputs: Record<string, unknown> | undefined;
  return {
    puid,
    state,
    texts,
    get inputs() {
      inputs ??= Object.fromEntries(texts.map(([source, text]) => [source, inputOf(text)]));
      return inputs;
    },
    missing: state === 'complete' ? 0 : Math.max(0, bound - received),
  };
}

/** What the add and tighten scripts answer: a kind, and the join's fields or its state. */
type Reply = [string, (string[] | string)?];

function outcomeOf(puid: string, [kind, detail]: Reply): AddOutcome {
  if (kind === 'complete' || kind === 'again') {
    return { kind, joined: joinedFrom(puid, detail as string[]) };
  }
  if (kind === 'late') return { kind: 'late', state: detail as JoinState };
  return { kind: 'waiting' };
}

/** JoinStore.due: the overdue joins claimed for this caller. */
async function claimDue(
  redis: RedisClient,
  options: { leaseMs: number },
  keys: { joinKey: (puid: string) => string; deadlines: string },
  nowMs: number,
  limit: number,
): Promise<{ claimed: Array<Joined & { claim: string }>; expired: number }> {
  const { joinKey, deadlines } = keys;
  const puids = await runScript(
    redis,
    joinDue,
    [deadlines, String(nowMs), String(limit), String(options.leaseMs)],
    (r) => r as string[],
  );
  const claimed: Array<Joined & { claim: string }> = [];
  let expired = 0;
  for (const puid of puids) {
    const claim = randomUUID();
    const [kind, fields] = await runScript(
      redis,
      joinClaim,
      [joinKey(puid), deadlines, puid, claim],
      (r) => r as [string, string[]?],
    );
    if (kind === 'expired') expired += 1;
    if (kind === 'claimed') claimed.push({ ...joinedFrom(puid, fields ?? []), claim });
  }
  return { claimed, expired };
}

function createJoinStore(
  redis: RedisClient,
  options: { node: string; deadlineMs: number; keepMs: number; leaseMs: number },
): JoinStore {
  const t = hashTag(`mlgraph:${options.node}`);
  const joinKey = (puid: string) => key('mlgraph', t, 'join', puid);
  const deadlines = key('mlgraph', t, 'deadlines');
  async function finish(puid: string, claim: string): Promise<boolean> {
    const done = await runScript(
      redis,
      joinFinish,
      [joinKey(puid), deadlines, puid, claim, String(options.keepMs)],
      (r) => r,
    );
    return Number(done) === 1;
  }
  async function get(puid: string): Promise<Joined | undefined> {
    const flat = await redis.hgetall(joinKey(puid));
    if (Object.keys(flat).length === 0) return undefined;
    return joinedFrom(puid, Object.entries(flat).flat());
  }
  return {
    async add(input) {
      const { puid, source, pending, nowMs } = input;
      const json = 'json' in input ? input.json : JSON.stringify(input.payload);
      return runScript(
        redis,
        joinAdd,
        [
          joinKey(puid),
          deadlines,
          puid,
          source,
          String(pending),
          json,
          String(nowMs),
          String(options.deadlineMs),
          String(options.keepMs),
        ],
        (reply) => outcomeOf(puid, reply as Reply),
      );
    },
    async tighten({ puid, inputs }) {
      return runScript(
        redis,
        joinTighten,
        [
          joinKey(puid),
          deadlines,
          puid,
          String(inputs),
          String(options.deadlineMs),
          String(options.keepMs),
        ],
        (reply) => outcomeOf(puid, reply as Reply),
      );
    },
    due: (nowMs, limit) => claimDue(redis, options, { joinKey, deadlines }, nowMs, limit),
    finish,
    get,
  };
}

export { createJoinStore };
export type { JoinStore, Joined, JoinState, AddOutcome };
