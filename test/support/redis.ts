/**
 * A test's own Redis client: the run's server (or the run's cluster, under `make
 * test-redis-cluster`), a key prefix nobody else uses, cleaned after.
 */
import { randomUUID } from 'node:crypto';
import { inject } from 'vitest';
import { loadConfig } from '../../shared/config/index.js';
import { requireRedis, waitReady } from '../../shared/redis/index.js';
import type { RedisClient } from '../../shared/redis/index.js';

export interface TestRedis {
  client: RedisClient;
  prefix: string;
  /** The single Redis's URL; '' on a cluster (use `env`). */
  url: string;
  /** Where the run's Redis is, as a function's environment says it (REDIS_URL or the cluster). */
  env: Record<string, string>;
  /** This test's keys as the server names them (with the prefix), on every master. */
  keys(): Promise<string[]>;
  /** SCRIPT FLUSH on every master, as a restart or a failover to a fresh server would. */
  flushScripts(): Promise<void>;
  /** Deletes this test's keys and disconnects. */
  close(): Promise<void>;
}

/** The run's Redis, as environment variables; `url` overrides it with one Redis. */
function locationEnv(url?: string): Record<string, string> {
  if (url !== undefined) return { REDIS_URL: url };
  const clusterNodes = inject('redisClusterNodes');
  return clusterNodes === ''
    ? { REDIS_URL: inject('redisUrl') }
    : { REDIS_CLUSTER_NODES: clusterNodes };
}

export async function testRedis(url?: string): Promise<TestRedis> {
  const prefix = `test-${randomUUID()}:`;
  const env = locationEnv(url);
  const { redis } = loadConfig({
    ...env,
    REDIS_KEY_PREFIX: prefix,
    REDIS_COMMAND_TIMEOUT_MS: '1000',
    REDIS_CONNECT_TIMEOUT_MS: '1000',
  });
  const client = requireRedis(redis, 'test', () => {});
  await waitReady(client, 10_000);
  return {
    client,
    prefix,
    url: env['REDIS_URL'] ?? '',
    env,
    keys: () => scanPrefixed(client, prefix),
    async flushScripts() {
      for (const server of masters(client)) await server.script('FLUSH');
    },
    async close() {
      if (client.status === 'ready') {
        // One key per UNLINK: on a cluster, one command may not span slots.
        const local = (await scanPrefixed(client, prefix)).map((k) => k.slice(prefix.length));
        await Promise.all(local.map((k) => client.unlink(k)));
      }
      client.disconnect();
    },
  };
}

/** The servers holding data: a cluster's masters, or the one Redis. */
function masters(client: RedisClient) {
  return 'nodes' in client && client.isCluster ? client.nodes('master') : [client];
}

/** keyPrefix is not applied to SCAN patterns, so the prefix is spelled out; master by master. */
async function scanPrefixed(client: RedisClient, prefix: string): Promise<string[]> {
  const found: string[] = [];
  for (const server of masters(client)) {
    let cursor = '0';
    do {
      const [next, keys] = await server.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 500);
      cursor = next;
      found.push(...keys);
    } while (cursor !== '0');
  }
  return found;
}
