/** Redis: the fail-fast client, key naming, scripts and exactly-once effects. */
export {
  createRedis,
  requireRedis,
  waitReady,
  redisReadiness,
  luaScript,
  runScript,
} from './client.js';
export { hashTag, key } from './keys.js';
export { defineIdempotentScript } from './idempotency.js';
export type { RedisClient, RedisConfig, LuaScript } from './client.js';
export type { Delivery, IdempotentOutcome } from './idempotency.js';
