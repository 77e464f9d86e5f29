/**
 * A function that keeps state in Redis loses its Redis mid-test: requests get 503 (retryable)
 * and readiness fails, at once rather than after a hang; when Redis returns, the same process
 * recovers by itself (reconnect, scripts reloaded) and nothing is counted twice.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { buildServer, defineFunction, onEvent } from '../../../shared/http/index.js';
import {
  defineIdempotentScript,
  hashTag,
  key,
  luaScript,
  redisReadiness,
} from '../../../shared/redis/index.js';
import { capturedTelemetry, listen } from '../../support/http.js';
import type { Listening } from '../../support/http.js';
import { startRedisServer } from '../../../local/index.js';
import type { RedisServer } from '../../../local/index.js';
import { testRedis } from '../../support/redis.js';
import type { TestRedis } from '../../support/redis.js';

const counter = key('uploads', hashTag('jis-a'));

describe('Redis outage and recovery', () => {
  let redisServer: RedisServer;
  let redis: TestRedis;
  let server: Listening;

  beforeAll(async () => {
    redisServer = await startRedisServer();
    redis = await testRedis(redisServer.url);
    const incrby = luaScript(1, "return redis.call('INCRBY', KEYS[1], ARGV[1])", 'countUploads');
    const add = defineIdempotentScript(redis.client, incrby, { ttlSeconds: 600 });
    const definition = defineFunction({
      name: 'counter',
      events: [
        onEvent({
          type: 'io.edgeai.test.uploaded',
          data: z.object({ uploaded: z.number().int().nonnegative() }),
          handle: async ({ data, event }) => {
            await add(
              { source: event.source, id: event.id, tag: 'jis-a' },
              [counter],
              [data.uploaded],
            );
            return { kind: 'accepted' };
          },
        }),
      ],
      readiness: [redisReadiness(redis.client)],
    });
    server = await listen(
      buildServer(definition, {
        telemetry: capturedTelemetry('counter'),
        bodyLimitBytes: 1 << 16,
        readinessTimeoutMs: 500,
      }),
    );
  });
  afterAll(async () => {
    await server.close();
    await redis.close();
    await redisServer.stop();
  });

  const send = (id: string, uploaded: number) =>
    fetch(server.url, {
      method: 'POST',
      headers: {
        'ce-specversion': '1.0',
        'ce-id': id,
        'ce-source': '/edge/node-1',
        'ce-type': 'io.edgeai.test.uploaded',
        'content-type': 'application/json',
      },
      body: JSON.stringify({ uploaded }),
      // A hang (an offline queue, a missing timeout) fails the test instead of passing late.
      signal: AbortSignal.timeout(5000),
    });
  const readiness = () =>
    fetch(`${server.url}/health/readiness`, { signal: AbortSignal.timeout(5000) });

  it('answers 503 while Redis is down and recovers without a restart', async () => {
    expect((await send('m1', 3)).status).toBe(202);
    expect((await send('m1', 3)).status).toBe(202); // redelivery: no second effect
    expect(await redis.client.get(counter)).toBe('3');
    expect((await readiness()).status).toBe(200);

    await redisServer.stop();
    const down = await send('m2', 4);
    expect(down.status).toBe(503);
    expect(down.headers.get('retry-after')).toBe('1');
    expect(((await down.json()) as { error: { message: string } }).error.message).toMatch(
      /^redis unavailable/,
    );
    const notReady = await readiness();
    expect(notReady.status).toBe(503);
    const state = (await notReady.json()) as { status: string; checks: { redis: string } };
    expect(state.status).toBe('unavailable');
    expect(state.checks.redis).toMatch(/redis/);
    expect((await fetch(`${server.url}/health/liveness`)).status).toBe(200);

    await redisServer.start();
    const deadline = Date.now() + 15_000;
    while ((await readiness()).status !== 200) {
      if (Date.now() > deadline) throw new Error('readiness did not recover');
      await new Promise((r) => setTimeout(r, 100));
    }
    // The restarted server is empty: scripts must be reloaded by the client on NOSCRIPT.
    expect((await send('m2', 4)).status).toBe(202);
    expect((await send('m2', 4)).status).toBe(202);
    expect(await redis.client.get(counter)).toBe('4');
  });
});
