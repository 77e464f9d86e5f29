/**
 * Report aggregation in Redis, one script per report so concurrent replicas cannot interleave:
 * each reporter's cumulative counters only move forward, the totals move by the difference,
 * and the report's dedupe marker is set in the same script (lua/record-report.lua, through
 * defineIdempotentScript). All keys of one service share a hash tag. A reporter's counters are
 * keyed by the authenticated node and the role as well as the reporter id the report names: were
 * they keyed by the id alone, any node could claim another's id and, counters moving only
 * forward, freeze its totals.
 *
 * Only the per-reporter counters expire (after the retention, counted from the service's last
 * report), because reporter ids churn with every worker process. The totals never expire, so the
 * counts in the status never go backwards after a quiet period (PERSIST also clears the TTL that
 * totals written by earlier versions carry). What bounds them is the service: they are keyed by
 * its uid, a few fields each, one hash per service ever created; a recreated service starts a
 * new hash and nothing here deletes the old one. A reporter that resumes after its counters
 * expired is counted again from zero: the totals stay monotonic, not exact, in that case.
 *
 * The totals hash also keeps the service's latest quality report (`quality.*`): one snapshot per
 * service, whichever reporter or replica sent it, as the edge's estimates are not additive.
 */
import { workerQuality } from '../crds/index.js';
import type { WorkerQuality } from '../crds/index.js';
import type { WorkerMessage } from '../messages/worker-message.js';
import { defineIdempotentScript, hashTag, key } from '../redis/index.js';
import type { RedisClient } from '../redis/index.js';
import { recordReport } from './lua/index.js';

const counterNames = ['uploaded', 'inferenceNumber', 'hardExampleNumber', 'shadowNumber'] as const;
type CounterName = (typeof counterNames)[number];

/** Every field a quality report may carry, in the order the script takes their values. */
const qualityNames = Object.keys(workerQuality.shape) as Array<keyof WorkerQuality>;

/**
 * What the totals hash holds: the counters, each worker's last reported state, and the service's
 * latest quality report (under `quality.*`).
 */
interface Totals {
  counters: Record<CounterName, number>;
  workers: Partial<
    Record<
      'edge' | 'cloud',
      { state: string; exitCode?: number; message?: string; reportTime: string }
    >
  >;
  quality?: WorkerQuality & { reportTime: string };
}

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

/**
 * The stored quality, read back through the report's schema: the hash holds strings, and what
 * could not have come from a valid report (a field renamed across versions) is not shown.
 */
function qualityFrom(raw: Record<string, string>): Pick<Totals, 'quality'> {
  const reportTime = raw['quality.reportTime'];
  if (reportTime === undefined) return {};
  const fields: Record<string, number | boolean> = {};
  for (const name of qualityNames) {
    const text = raw[`quality.${name}`];
    if (text === undefined) continue;
    // String(value) wrote them: a boolean as true/false, a number as its shortest exact form.
    fields[name] = text === 'true' ? true : text === 'false' ? false : Number(text);
  }
  const parsed = workerQuality.safeParse(fields);
  return parsed.success ? { quality: { ...parsed.data, reportTime } } : {};
}

function createReportCounters(
  redis: RedisClient,
  options: { dedupeSeconds: number; retentionSeconds: number },
): ReportCounters {
  const script = defineIdempotentScript(redis, recordReport, { ttlSeconds: options.dedupeSeconds });
  return {
    async record(tag, deliveryId, reporter, message, reportTime) {
      const k = keysFor(tag);
      const info = message.output?.taskInfo;
      const quality = message.output?.quality;
      const value = (v: number | boolean | undefined) => (v === undefined ? '' : String(v));
      const outcome = await script(
        { ...deliveryId, tag },
        [k.reporters, k.totals],
        [
          reporter.node,
          reporter.id,
          message.worker,
          message.status,
          value(message.exitCode),
          message.message ?? '',
          reportTime,
          options.retentionSeconds,
          counterNames.length,
          ...counterNames.flatMap((name) => [name, value(info?.[name])]),
          quality === undefined ? '0' : '1',
          ...(quality === undefined
            ? []
            : qualityNames.flatMap((name) => [name, value(quality[name])])),
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
      return { counters, workers, ...qualityFrom(raw) };
    },
  };
}

export { createReportCounters, counterNames, qualityNames };
export type { ReportCounters, Reporter, Totals };
