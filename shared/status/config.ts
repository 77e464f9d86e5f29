/** upstream-status's settings, read once at start-up (see README "Configuration"). */
import { z } from 'zod';
import { readEnv } from '../config/index.js';
import type { Env } from '../config/index.js';

const schema = z.object({
  NODE_TOKEN_NAMESPACE: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'must be a namespace name')
    .default('edgeai-system'),
  NODE_TOKEN_CACHE_SECONDS: z.coerce.number().int().min(0).default(30),
  STATUS_WRITE_ATTEMPTS: z.coerce.number().int().min(1).max(100).default(10),
  REPORT_DEDUPE_SECONDS: z.coerce.number().int().min(1).default(86_400),
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
  retentionSeconds: number;
}

function loadUpstreamConfig(env: Env = process.env): UpstreamConfig {
  const raw = readEnv(schema, env);
  return {
    tokenNamespace: raw.NODE_TOKEN_NAMESPACE,
    tokenCacheMs: raw.NODE_TOKEN_CACHE_SECONDS * 1000,
    statusWriteAttempts: raw.STATUS_WRITE_ATTEMPTS,
    dedupeSeconds: raw.REPORT_DEDUPE_SECONDS,
    retentionSeconds: raw.REPORT_RETENTION_SECONDS,
  };
}

export { loadUpstreamConfig };
export type { UpstreamConfig };
