/**
 * Report aggregation in Redis, one script per report so concurrent replicas cannot interleave:
 * each reporter's cumulative counters only move forward, the totals move by the difference,
 * and the report's dedupe marker is set in the same script (defineIdempotentScript). All keys
 * of one service share a hash tag. A reporter's counters are keyed by the authenticated node and
 * the role as well as the reporter id the report names: were they keyed by the id alone, any
 * node could claim another's id and, counters moving only forward, freeze its totals.
 *
 * Only the per-reporter counters expire (after the retention, counted from the service's last
 * report), because reporter ids churn with every worker process. The totals never expire, so the
 * counts in the status never go backwards after a quiet period (PERSIST also clears the TTL that
 * totals written by earlier versions carry). What bounds them is the service: they are keyed by
 * its uid, a few fields each, one hash per service ever created; a recreated service starts a
 * new hash and nothing here deletes the old one. A reporter that resumes after its counters
 * expired is counted again from zero: the totals stay monotonic, not exact, in that case.
 */
import { defineIdempotentScript, hashTag, key } from '../redis/index.js';
import type { RedisClient } from '../redis/index.js';
import type { WorkerMessage } from './worker-message.js';

const counterNames = ['uploaded', 'inferenceNumber', 'hardExampleNumber'] as const;
type CounterName = (typeof counterNames)[number];

/** What the totals hash holds: the counters and each worker's last reported state. */
interface Totals {
  counters: Record<CounterName, number>;
  workers: Partial<
    Record<
      'edge' | 'cloud',
      { state: string; exitCode?: number; message?: string; reportTime: string }
    >
  >;
}

const recordLua = `
local reporters, totals = KEYS[1], KEYS[2]
local node, reporter, role = ARGV[1], ARGV[2], ARGV[6]
-- The node is the authenticated one and the role one it was checked to run; the reporter id
-- is the node's own word. Keying by all three means no node can move another node's counters.
local owner = node .. '|' .. role .. '|' .. reporter
local names = {'uploaded', 'inferenceNumber', 'hardExampleNumber'}
for i, name in ipairs(names) do
  local value = ARGV[2 + i]
  if value ~= '' then
    local field = owner .. '|' .. name
    local current = redis.call('HGET', reporters, field)
    local migrated = false
    if not current then
      -- Counters written before they were keyed by node and role: taken over as this
      -- reporter's baseline, else a worker running across the upgrade would be counted twice.
      local legacy = reporter .. '|' .. name
      current = redis.call('HGET', reporters, legacy)
      if current then
        redis.call('HDEL', reporters, legacy)
        migrated = true
      end
    end
    local old = tonumber(current or '0')
    local new = tonumber(value)
    if new > old then
      redis.call('HSET', reporters, field, value)
      redis.call('HINCRBY', totals, name, new - old)
    elseif migrated then
      redis.call('HSET', reporters, field, current)
    end
  end
end
redis.call('HSET', totals, role .. '.state', ARGV[7], role .. '.exitCode', ARGV[8],
  role .. '.message', ARGV[9], role .. '.reportTime', ARGV[10])
redis.call('EXPIRE', reporters, ARGV[11])
redis.call('PERSIST', totals)
return 1
`;

/** Whose counters a report moves: the authenticated node and the reporter id it gives. */
interface Reporter {
  node: string;
  /** One worker process on that node (the report's `reporter`, else the node name). */
  id: string;
}

interface ReportCounters {
  /**
   * Records one report unless `deliveryId` was seen before; says whether it applied. `tag`
   * identifies the service (namespace, name and uid, so a recreated service starts at zero).
   */
  record(
    tag: string,
    deliveryId: { source: string; id: string },
    reporter: Reporter,
    message: WorkerMessage,
    reportTime: string,
  ): Promise<boolean>;
  totals(tag: string): Promise<Totals>;
}

function keysFor(tag: string) {
  const t = hashTag(tag);
  return { reporters: key('status', t, 'reporters'), totals: key('status', t, 'totals') };
}

function createReportCounters(
  redis: RedisClient,
  options: { dedupeSeconds: number; retentionSeconds: number },
): ReportCounters {
  const script = defineIdempotentScript(redis, 'status-report', {
    keys: 2,
    lua: recordLua,
    ttlSeconds: options.dedupeSeconds,
  });
  return {
    async record(tag, deliveryId, reporter, message, reportTime) {
      const k = keysFor(tag);
      const info = message.output?.taskInfo;
      const value = (v: number | undefined) => (v === undefined ? '' : String(v));
      const outcome = await script(
        { ...deliveryId, tag },
        [k.reporters, k.totals],
        [
          reporter.node,
          reporter.id,
          value(info?.uploaded),
          value(info?.inferenceNumber),
          value(info?.hardExampleNumber),
          message.worker,
          message.status,
          value(message.exitCode),
          message.message ?? '',
          reportTime,
          options.retentionSeconds,
        ],
      );
      return outcome.applied;
    },
    async totals(tag) {
      const raw = await redis.hgetall(keysFor(tag).totals);
      const counters = Object.fromEntries(
        counterNames.map((name) => [name, Number(raw[name] ?? 0)]),
      ) as Record<CounterName, number>;
      const workers: Totals['workers'] = {};
      for (const role of ['edge', 'cloud'] as const) {
        const state = raw[`${role}.state`];
        const reportTime = raw[`${role}.reportTime`];
        if (state === undefined || reportTime === undefined) continue;
        const exitCode = raw[`${role}.exitCode`];
        const message = raw[`${role}.message`];
        workers[role] = {
          state,
          reportTime,
          ...(exitCode === undefined || exitCode === '' ? {} : { exitCode: Number(exitCode) }),
          ...(message === undefined || message === '' ? {} : { message }),
        };
      }
      return { counters, workers };
    },
  };
}

export { createReportCounters, counterNames };
export type { ReportCounters, Reporter, Totals };
