/**
 * Report aggregation in Redis, one script per report so concurrent replicas cannot interleave:
 * each reporter's cumulative counters only move forward, the totals move by the difference,
 * and the report's dedupe marker is set in the same script (defineIdempotentScript). All keys
 * of one service share a hash tag.
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
local reporter = ARGV[1]
local names = {'uploaded', 'inferenceNumber', 'hardExampleNumber'}
for i, name in ipairs(names) do
  local value = ARGV[1 + i]
  if value ~= '' then
    local field = reporter .. '|' .. name
    local old = tonumber(redis.call('HGET', reporters, field) or '0')
    local new = tonumber(value)
    if new > old then
      redis.call('HSET', reporters, field, value)
      redis.call('HINCRBY', totals, name, new - old)
    end
  end
end
local role = ARGV[5]
redis.call('HSET', totals, role .. '.state', ARGV[6], role .. '.exitCode', ARGV[7],
  role .. '.message', ARGV[8], role .. '.reportTime', ARGV[9])
redis.call('EXPIRE', reporters, ARGV[10])
redis.call('EXPIRE', totals, ARGV[10])
return 1
`;

interface ReportCounters {
  /**
   * Records one report unless `deliveryId` was seen before; says whether it applied. `tag`
   * identifies the service (namespace, name and uid, so a recreated service starts at zero).
   */
  record(
    tag: string,
    deliveryId: { source: string; id: string },
    reporter: string,
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
          reporter,
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
export type { ReportCounters, Totals };
