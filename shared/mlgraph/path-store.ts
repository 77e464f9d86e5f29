/**
 * Which routers each prediction of a graph went through, kept in Redis for a while so that a
 * reward sent later to the graph reaches every router on that prediction's path (seed 003: "the
 * reward needs to hit the graph nodes that the given request travelled"). A retried prediction
 * with the same id adds to the same set: a router that saw either attempt gets the reward, and
 * each router applies it once per prediction id itself.
 */
import { hashTag, key, runScript } from '../redis/index.js';
import type { RedisClient } from '../redis/index.js';
import { pathRecord } from './lua/index.js';

interface PathStore {
  record(puid: string, routers: readonly string[]): Promise<void>;
  /** The routers on the path, or none when the id is unknown or expired. */
  routers(puid: string): Promise<string[]>;
}

function createPathStore(redis: RedisClient, options: { graph: string; ttlMs: number }): PathStore {
  // One key per prediction, its own slot on a cluster: a busy graph's paths spread out.
  const pathKey = (puid: string) =>
    key('mlgraph', hashTag(`path:${options.graph}:${puid}`), 'path');
  return {
    async record(puid, routers) {
      if (routers.length === 0) return;
      await runScript(
        redis,
        pathRecord,
        [pathKey(puid), String(options.ttlMs), ...routers],
        (r) => r,
      );
    },
    async routers(puid) {
      return (await redis.smembers(pathKey(puid))).sort();
    },
  };
}

export { createPathStore };
export type { PathStore };
