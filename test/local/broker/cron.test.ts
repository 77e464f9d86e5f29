/** The PingSource schedule subset: parsing and the next firing time, in UTC. */
import { describe, expect, it } from 'vitest';
import { CronError, parseCron } from '../../../local/broker/index.js';

const at = (iso: string) => new Date(iso);
const next = (expression: string, after: string) =>
  parseCron(expression).next(at(after))?.toISOString();

describe('parseCron', () => {
  it('fires every minute for * * * * *, strictly after the given time', () => {
    expect(next('* * * * *', '2026-03-01T10:00:00.000Z')).toBe('2026-03-01T10:01:00.000Z');
    expect(next('* * * * *', '2026-03-01T10:00:59.999Z')).toBe('2026-03-01T10:01:00.000Z');
    expect(next('* * * * *', '2026-12-31T23:59:30.000Z')).toBe('2027-01-01T00:00:00.000Z');
  });

  it('reads steps, lists, ranges and names', () => {
    expect(next('*/15 * * * *', '2026-03-01T10:00:00Z')).toBe('2026-03-01T10:15:00.000Z');
    expect(next('*/15 * * * *', '2026-03-01T10:50:00Z')).toBe('2026-03-01T11:00:00.000Z');
    expect(next('5,35 * * * *', '2026-03-01T10:06:00Z')).toBe('2026-03-01T10:35:00.000Z');
    expect(next('0 9-17/4 * * *', '2026-03-01T10:00:00Z')).toBe('2026-03-01T13:00:00.000Z');
    expect(next('10/20 * * * *', '2026-03-01T10:31:00Z')).toBe('2026-03-01T10:50:00.000Z');
    // 2026-03-01 is a Sunday.
    expect(next('0 9 * * MON-FRI', '2026-03-01T10:00:00Z')).toBe('2026-03-02T09:00:00.000Z');
    expect(next('0 0 1 jan,Jul *', '2026-03-01T00:00:00Z')).toBe('2026-07-01T00:00:00.000Z');
    expect(next('30 4 ? * 6', '2026-03-01T00:00:00Z')).toBe('2026-03-07T04:30:00.000Z');
  });

  it('matches either day field when both are restricted, both when one is *', () => {
    // The 13th, or any Friday: Friday 2026-03-06 comes first.
    expect(next('0 0 13 * 5', '2026-03-01T00:00:00Z')).toBe('2026-03-06T00:00:00.000Z');
    // With the day of week *, only the 13th.
    expect(next('0 0 13 * *', '2026-03-01T00:00:00Z')).toBe('2026-03-13T00:00:00.000Z');
    // A stepped * is a restriction (robfig/cron): odd days OR Mondays.
    expect(next('0 0 */2 * 1', '2026-03-01T12:00:00Z')).toBe('2026-03-02T00:00:00.000Z');
  });

  it('reads descriptors', () => {
    expect(next('@hourly', '2026-03-01T10:20:00Z')).toBe('2026-03-01T11:00:00.000Z');
    expect(next('@daily', '2026-03-01T10:20:00Z')).toBe('2026-03-02T00:00:00.000Z');
    expect(next('@weekly', '2026-03-01T10:20:00Z')).toBe('2026-03-08T00:00:00.000Z');
    expect(next('@monthly', '2026-03-01T10:20:00Z')).toBe('2026-04-01T00:00:00.000Z');
    expect(next('@yearly', '2026-03-01T10:20:00Z')).toBe('2027-01-01T00:00:00.000Z');
  });

  it('finds rare dates and refuses impossible ones', () => {
    expect(next('0 0 29 2 *', '2026-03-01T00:00:00Z')).toBe('2028-02-29T00:00:00.000Z');
    expect(() => parseCron('0 0 30 2 *')).toThrow(/Invalid explicit day of month/);
  });

  it('refuses what it does not support, naming the field', () => {
    const refusal = (expression: string) => {
      try {
        parseCron(expression);
      } catch (err) {
        expect(err).toBeInstanceOf(CronError);
        return (err as Error).message;
      }
      throw new Error(`expected ${expression} to be refused`);
    };
    expect(refusal('* * * *')).toMatch(/expected 5 fields .* got 4/);
    expect(refusal('0 0 * * * *')).toMatch(/expected 5 fields .* got 6/);
    expect(refusal('60 * * * *')).toMatch(/got value 60 expected range 0-59/);
    expect(refusal('* * 0 * *')).toMatch(/got value 0 expected range 1-31/);
    expect(refusal('* * * 13 *')).toMatch(/got value 13 expected range 1-12/);
    expect(refusal('5-1 * * * *')).toMatch(/Invalid range: 5-1/);
    expect(refusal('CRON_TZ=Europe/Paris * * * * *')).toMatch(/time zone prefix/);
    expect(refusal('@every 1m')).toMatch(/unsupported descriptor/);
  });
});
