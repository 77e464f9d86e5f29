/** upstream-status's settings: the accepted age of a signed report and what it depends on. */
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../../shared/errors/index.js';
import { loadUpstreamConfig } from '../../../shared/status/index.js';

describe('loadUpstreamConfig', () => {
  it('accepts a signed report up to 10 minutes from the clock unless told otherwise', () => {
    expect(loadUpstreamConfig({}).maxReportAgeMs).toBe(600_000);
    expect(loadUpstreamConfig({ REPORT_MAX_AGE_SECONDS: '90' }).maxReportAgeMs).toBe(90_000);
  });

  it.each([
    [{ REPORT_MAX_AGE_SECONDS: '0' }, /REPORT_MAX_AGE_SECONDS: Too small/],
    [{ REPORT_MAX_AGE_SECONDS: 'soon' }, /REPORT_MAX_AGE_SECONDS: Invalid input/],
    // Accepted for twice the age (old or ahead), an event must be remembered at least as long.
    [
      { REPORT_MAX_AGE_SECONDS: '600', REPORT_DEDUPE_SECONDS: '1199' },
      /REPORT_MAX_AGE_SECONDS: at most half of REPORT_DEDUPE_SECONDS \(1199\)/,
    ],
  ])('refuses %o', (env, message) => {
    expect(() => loadUpstreamConfig(env)).toThrow(ConfigError);
    expect(() => loadUpstreamConfig(env)).toThrow(message);
  });

  it('takes a dedupe window of exactly twice the age', () => {
    const env = { REPORT_MAX_AGE_SECONDS: '600', REPORT_DEDUPE_SECONDS: '1200' };
    expect(loadUpstreamConfig(env)).toMatchObject({ maxReportAgeMs: 600_000, dedupeSeconds: 1200 });
  });
});
