/**
 * ISO-8601 durations as Knative's delivery spec writes them (`backoffDelay: PT0.5S`,
 * `timeout: PT30S`). Weeks, days, hours, minutes and seconds, each with an optional fraction;
 * years and months are refused (their length depends on the calendar, and no delivery setting
 * needs them).
 */

const pattern =
  /^P(?:(\d+(?:\.\d+)?)Y)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)W)?(?:(\d+(?:\.\d+)?)D)?(?:T(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?)?$/;

const msPer = {
  week: 7 * 24 * 3_600_000,
  day: 24 * 3_600_000,
  hour: 3_600_000,
  minute: 60_000,
  second: 1_000,
};

/**
 * The duration in milliseconds (rounded to the nearest one), or an Error saying what is wrong
 * with `text`.
 */
function parseIsoDuration(text: string): number | Error {
  const match = pattern.exec(text);
  if (match === null || text === 'P' || text.endsWith('T')) {
    return new Error(
      `${JSON.stringify(text)} is not an ISO-8601 duration such as PT0.5S, PT1M or P1DT2H`,
    );
  }
  const [, years, months, weeks, days, hours, minutes, seconds] = match;
  if (years !== undefined || months !== undefined) {
    return new Error(`${JSON.stringify(text)}: years and months are not supported in a duration`);
  }
  const value = (part: string | undefined) => (part === undefined ? 0 : Number(part));
  return Math.round(
    value(weeks) * msPer.week +
      value(days) * msPer.day +
      value(hours) * msPer.hour +
      value(minutes) * msPer.minute +
      value(seconds) * msPer.second,
  );
}

export { parseIsoDuration };
