/** upstream-status's settings, read once at start-up (docs/configuration.md "Per function"). */
import { z } from 'zod';
import { readEnv } from '../config/index.js';
import { ConfigError } from '../errors/index.js';
import type { Env } from '../config/index.js';

const schema = z.object({
  NODE_TOKEN_NAMESPACE: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'must be a namespace name')
    .default('edgeai-system'),
  NODE_TOKEN_CACHE_SECONDS: z.coerce.number().int().min(0).default(30),
  STATUS_WRITE_ATTEMPTS: z.coerce.number().int().min(1).max(100).default(10),
  REPORT_DEDUPE_SECONDS: z.coerce.number().int().min(1).default(86_400),
  REPORT_MAX_AGE_SECONDS: z.coerce.number().int().min(1).default(600),
  REPORT_RETENTION_SECONDS: z.coerce
    .number()
    .int()
    .min(60)
    .default(30 * 86_400),
});

interface UpstreamConfig {
  tokenNamespace: string;
  tokenCacheMs: number;
  statusWriteAttempts: number;
  dedupeSeconds: number;
  /** How far a signed event's time may be from the server's clock, either way. */
  maxReportAgeMs: number;
  retentionSeconds: number;
}

function loadUpstreamConfig(env: Env = process.env): UpstreamConfig {
  const raw = readEnv(schema, env);
  // A signed event is accepted while its time is within the maximum age either way of the
  // clock, so for 2 x that age; its dedupe marker must outlive that or it could be replayed.
  if (raw.REPORT_DEDUPE_SECONDS < 2 * raw.REPORT_MAX_AGE_SECONDS) {
    throw new ConfigError(
      `REPORT_MAX_AGE_SECONDS: at most half of REPORT_DEDUPE_SECONDS (${raw.REPORT_DEDUPE_SECONDS}), or a report could be replayed after its id is forgotten`,
    );
  }
  return {
    tokenNamespace: raw.NODE_TOKEN_NAMESPACE,
    tokenCacheMs: raw.NODE_TOKEN_CACHE_SECONDS * 1000,
    statusWriteAttempts: raw.STATUS_WRITE_ATTEMPTS,
    dedupeSeconds: raw.REPORT_DEDUPE_SECONDS,
    maxReportAgeMs: raw.REPORT_MAX_AGE_SECONDS * 1000,
    retentionSeconds: raw.REPORT_RETENTION_SECONDS,
  };
}

export { loadUpstreamConfig };
export type { UpstreamConfig };
