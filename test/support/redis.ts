/** A test's own Redis client: the run's server, a key prefix nobody else uses, cleaned after. */
import { randomUUID } from 'node:crypto';
import { inject } from 'vitest';
import { createRedis, waitReady } from '../../shared/redis/index.js';
import type { RedisClient } from '../../shared/redis/index.js';

export interface TestRedis {
  client: RedisClient;
  prefix: string;
  url: string;
  /** Deletes this test's keys and disconnects. */
  close(): Promise<void>;
}

export async function testRedis(url: string = inject('redisUrl')): Promise<TestRedis> {
  const prefix = `test-${randomUUID()}:`;
  const client = createRedis(
    { url, keyPrefix: prefix, commandTimeoutMs: 1000, connectTimeoutMs: 1000 },
    () => {},
  );
  await waitReady(client, 10_000);
  return {
    client,
    prefix,
    url,
    async close() {
      if (client.status === 'ready') {
        // keyPrefix is not applied to SCAN patterns, so the prefix is spelled out here.
        let cursor = '0';
        do {
          const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 500);
          cursor = next;
          const local = keys.map((k) => k.slice(prefix.length));
          if (local.length > 0) await client.del(...local);
        } while (cursor !== '0');
      }
      client.disconnect();
    },
  };
}
