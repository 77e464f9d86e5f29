/** Redis: the fail-fast client, key naming, scripts and exactly-once effects. */
export { createRedis, requireRedis, waitReady, redisReadiness } from './connection.js';
export { luaScript, runScript } from './client.js';
export { hashTag, key } from './keys.js';
export { luaFile } from './scripts.js';
export { defineIdempotentScript } from './idempotency.js';
export type { RedisClient, LuaScript } from './client.js';
export type { LuaFile } from './scripts.js';
export type { Delivery } from './idempotency.js';
