import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UnavailableError } from '../../../shared/errors/index.js';
import {
  createRedis,
  defineIdempotentScript,
  hashTag,
  key,
  luaScript,
  redisReadiness,
  requireRedis,
  runScript,
  waitReady,
} from '../../../shared/redis/index.js';
import { loadConfig } from '../../../shared/config/index.js';
import { freePort, startRedisServer } from '../../../local/index.js';
import type { RedisServer } from '../../../local/index.js';
import { testRedis } from '../../support/redis.js';
import type { TestRedis } from '../../support/redis.js';

describe('defineIdempotentScript', () => {
  let redis: TestRedis;
  let add: ReturnType<typeof defineIdempotentScript>;
  const counter = key('count', hashTag('t1'));

  beforeAll(async () => {
    redis = await testRedis();
    const incrby = luaScript(1, "return redis.call('INCRBY', KEYS[1], ARGV[1])", 'testAdd');
    add = defineIdempotentScript(redis.client, incrby, { ttlSeconds: 60 });
  });
  afterAll(() => redis.close());

  it('applies a delivery once; a redelivery has no second effect', async () => {
    const delivery = { source: '/edge/a', id: 'e1', tag: 't1' };
    expect(await add(delivery, [counter], [5])).toEqual({ applied: true, result: 5 });
    expect(await add(delivery, [counter], [5])).toEqual({ applied: false });
    expect(await add({ ...delivery, id: 'e2' }, [counter], [1])).toEqual({
      applied: true,
      result: 6,
    });
    expect(await redis.client.get(counter)).toBe('6');
  });

  it('keeps (source, id) pairs apart even when the separator appears in them', async () => {
    const other = key('count', hashTag('t1'), 'sep');
    expect(await add({ source: 'a:b', id: 'c', tag: 't1' }, [other], [1])).toMatchObject({
      applied: true,
    });
    expect(await add({ source: 'a', id: 'b:c', tag: 't1' }, [other], [1])).toMatchObject({
      applied: true,
    });
    expect(await redis.client.get(other)).toBe('2');
  });

  it('applies exactly once under 50 concurrent deliveries of one event', async () => {
    const racing = key('count', hashTag('t1'), 'race');
    const delivery = { source: '/edge/b', id: 'same', tag: 't1' };
    const outcomes = await Promise.all(
      Array.from({ length: 50 }, () => add(delivery, [racing], [1])),
    );
    expect(outcomes.filter((o) => o.applied)).toHaveLength(1);
    expect(await redis.client.get(racing)).toBe('1');
  });

  it('expires the marker after the TTL and stores it under the installation prefix', async () => {
    await add({ source: '/ttl', id: 'x', tag: 't1' }, [counter], [0]);
    expect(await redis.keys()).toContain(`${redis.prefix}seen:{t1}:4:/ttl:x`);
    const ttl = await redis.client.ttl('seen:{t1}:4:/ttl:x');
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(60);
  });

  it('leaves no marker when the effect fails, so the redelivery can still apply', async () => {
    const effect = luaScript(
      1,
      [
        "if ARGV[1] == 'boom' then return redis.error_reply('effect refused') end",
        "if ARGV[1] == 'raise' then error('raised') end",
        "if ARGV[1] == 'wrongtype' then redis.call('HSET', KEYS[1], 'f', 1) end",
        "return redis.call('INCR', KEYS[1])",
      ].join('\n'),
      'testFail',
    );
    const failing = defineIdempotentScript(redis.client, effect, { ttlSeconds: 60 });
    const target = key('count', hashTag('t1'), 'fail');
    const delivery = { source: '/f', id: '1', tag: 't1' };
    await expect(failing(delivery, [target], ['boom'])).rejects.toThrow(/effect refused/);
    await expect(failing(delivery, [target], ['boom'])).rejects.not.toBeInstanceOf(
      UnavailableError,
    );
    await expect(failing(delivery, [target], ['raise'])).rejects.toThrow(/raised/);
    expect(await failing(delivery, [target], ['ok'])).toEqual({ applied: true, result: 1 });
    const hashed = key('hash', hashTag('t1'));
    const other = { ...delivery, id: '2' };
    await expect(failing(other, [hashed], ['wrongtype'])).rejects.toThrow(/WRONGTYPE/);
    await redis.client.del(hashed);
    expect(await failing(other, [hashed], ['ok'])).toEqual({ applied: true, result: 1 });
  });
});

describe('runScript', () => {
  it('reloads a script the server forgot (restart, failover) and keeps the key prefix', async () => {
    const redis = await testRedis();
    try {
      const script = luaScript(1, "return redis.call('INCRBY', KEYS[1], ARGV[1])");
      const counter = key('n', hashTag('s'));
      expect(await runScript(redis.client, script, [counter, '2'], Number)).toBe(2);
      await redis.flushScripts();
      expect(await runScript(redis.client, script, [counter, '3'], Number)).toBe(5);
      expect(await runScript(redis.client, script, [counter, '1'], Number)).toBe(6);
      expect(await redis.keys()).toEqual([`${redis.prefix}n:{s}`]);
    } finally {
      await redis.close();
    }
  });
});

describe('redis client without a server', () => {
  it('rejects commands at once with an UnavailableError instead of queueing them', async () => {
    const port = await freePort();
    const errors: Error[] = [];
    const client = createRedis(
      {
        url: `redis://127.0.0.1:${port}`,
        keyPrefix: 'x:',
        commandTimeoutMs: 500,
        connectTimeoutMs: 500,
      },
      (err) => errors.push(err),
    );
    try {
      await expect(client.get('k')).rejects.toBeInstanceOf(UnavailableError);
      await expect(client.get('k')).rejects.toThrow(/redis unavailable/);
      await new Promise((r) => setTimeout(r, 200));
      expect(errors.length).toBeGreaterThan(0);
    } finally {
      client.disconnect();
    }
  });
});

describe('redis client against a server that requires a password', () => {
  let server: RedisServer;
  const password = 'correct horse:battery@staple';
  beforeAll(async () => {
    server = await startRedisServer({ password });
  });
  afterAll(() => server.stop());

  const connect = (env: Record<string, string>) => {
    const warnings: string[] = [];
    const config = loadConfig({ REDIS_URL: server.url, REDIS_CONNECT_TIMEOUT_MS: '500', ...env });
    const client = requireRedis(config.redis, 'test', (fields, message) =>
      warnings.push(`${message} ${JSON.stringify(fields)}`),
    );
    return { client, warnings };
  };

  it('authenticates with REDIS_PASSWORD', async () => {
    const { client } = connect({ REDIS_PASSWORD: password });
    try {
      await waitReady(client, 5000);
      await expect(redisReadiness(client).check()).resolves.toBeUndefined();
      expect(await client.set('auth-check', '1', 'EX', 5)).toBe('OK');
    } finally {
      client.disconnect();
    }
  });

  it.each([
    ['without a password', {}],
    ['with a wrong one', { REDIS_PASSWORD: 'guess' }],
  ])(
    'answers 503 and stays not ready %s, and never logs the password tried',
    async (_, env: Record<string, string>) => {
      const { client, warnings } = connect(env);
      try {
        await new Promise((r) => setTimeout(r, 300));
        await expect(client.get('k')).rejects.toBeInstanceOf(UnavailableError);
        await expect(redisReadiness(client).check()).rejects.toThrow(/redis connection is/);
        expect(warnings.join('\n')).toMatch(/NOAUTH|WRONGPASS/);
        expect(warnings.join('\n')).not.toMatch(/guess|correct horse/);
      } finally {
        client.disconnect();
      }
    },
  );
});
