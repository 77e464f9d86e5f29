/** Pieces of the embedded local stack (no cluster needed). */
export { freePort, startRedisServer } from './redis-server.js';
export type { RedisServer } from './redis-server.js';
