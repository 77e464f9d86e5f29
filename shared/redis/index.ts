/** Redis: the fail-fast client, key naming, scripts and exactly-once effects. */
export { createRedis, waitReady, redisReadiness, scriptRunner } from './client.js';
export { hashTag, key } from './keys.js';
export { defineIdempotentScript } from './idempotency.js';
export type { RedisClient, RedisConfig } from './client.js';
export type { Delivery, IdempotentOutcome } from './idempotency.js';
