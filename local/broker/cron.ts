/**
 * The PingSource schedule: five-field cron (minute hour day-of-month month day-of-week) and the
 * `@hourly`-style descriptors, in UTC, as Knative's PingSource reads them — parsed and stepped by
 * cron-parser. What robfig/cron (Knative's parser) has and cron-parser reads otherwise is refused
 * up front, with a message: a `CRON_TZ=`/`TZ=` prefix, `@every`, and six-field (seconds)
 * schedules.
 */
import { CronExpressionParser } from 'cron-parser';

interface CronSchedule {
  readonly expression: string;
  /**
   * The first minute strictly after `after` that the schedule fires at, or undefined when none
   * comes within the next five years (a date that never exists, such as `0 0 30 2 *`).
   */
  next(after: Date): Date | undefined;
}

class CronError extends Error {
  override readonly name = 'CronError';
}

const descriptors = new Set([
  '@yearly',
  '@annually',
  '@monthly',
  '@weekly',
  '@daily',
  '@midnight',
  '@hourly',
]);

const horizonMs = 5 * 366 * 24 * 3_600_000;

function parseCron(expression: string): CronSchedule {
  const trimmed = expression.trim();
  const quoted = JSON.stringify(expression);
  if (/^(CRON_)?TZ=/.test(trimmed)) {
    throw new CronError(
      `schedule ${quoted}: a time zone prefix is not supported (schedules run in UTC)`,
    );
  }
  if (trimmed.startsWith('@')) {
    if (!descriptors.has(trimmed.toLowerCase())) {
      throw new CronError(`schedule ${quoted}: unsupported descriptor ${trimmed.split(/\s/)[0]}`);
    }
  } else {
    const count = trimmed.split(/\s+/).length;
    if (count !== 5) {
      throw new CronError(
        `schedule ${quoted}: expected 5 fields (minute hour day-of-month month day-of-week), got ${count}`,
      );
    }
  }
  // `@midnight` is robfig/cron's name for `@daily`.
  const text = trimmed.toLowerCase() === '@midnight' ? '@daily' : trimmed;
  const parse = (currentDate: Date) =>
    CronExpressionParser.parse(text, { currentDate, tz: 'UTC', strict: false });
  try {
    parse(new Date(0));
  } catch (err) {
    throw new CronError(`schedule ${quoted}: ${err instanceof Error ? err.message : String(err)}`);
  }
  return {
    expression,
    next(after) {
      try {
        const next = parse(after).next().toDate();
        return next.getTime() - after.getTime() > horizonMs ? undefined : next;
      } catch {
        // cron-parser gives up on a date that never comes (e.g. 30 February).
        return undefined;
      }
    },
  };
}

export { parseCron, CronError };
export type { CronSchedule };
