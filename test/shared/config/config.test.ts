import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../shared/config/index.js';
import { ConfigError } from '../../../shared/errors/index.js';

describe('loadConfig', () => {
  it('has working defaults for an empty environment', () => {
    expect(loadConfig({})).toEqual({
      port: 8080,
      functionTarget: undefined,
      logLevel: 'info',
      bodyLimitBytes: 1048576,
      redis: {
        url: undefined,
        clusterNodes: undefined,
        sentinels: undefined,
        sentinelName: undefined,
        sentinelPassword: undefined,
        tls: false,
        username: undefined,
        password: undefined,
        keyPrefix: 'edgeai:',
        commandTimeoutMs: 1000,
        connectTimeoutMs: 2000,
        waitReplicas: 0,
        waitTimeoutMs: 500,
      },
      readinessTimeoutMs: 1000,
    });
  });

  it('reads and converts every variable', () => {
    const config = loadConfig({
      PORT: '9000',
      FUNCTION_TARGET: 'edge-infer',
      LOG_LEVEL: 'debug',
      BODY_LIMIT_BYTES: '2048',
      REDIS_URL: 'redis://127.0.0.1:6380/2',
      REDIS_USERNAME: 'edge-worker',
      REDIS_PASSWORD: 'pa55:word@x',
      REDIS_KEY_PREFIX: 'site-a:',
      REDIS_COMMAND_TIMEOUT_MS: '250',
      REDIS_CONNECT_TIMEOUT_MS: '300',
      READINESS_TIMEOUT_MS: '400',
    });
    expect(config).toMatchObject({
      port: 9000,
      functionTarget: 'edge-infer',
      logLevel: 'debug',
      bodyLimitBytes: 2048,
    });
    expect(config.redis).toMatchObject({
      url: 'redis://127.0.0.1:6380/2',
      username: 'edge-worker',
      password: 'pa55:word@x',
      keyPrefix: 'site-a:',
      commandTimeoutMs: 250,
      connectTimeoutMs: 300,
    });
  });

  it('reads a cluster by its seed nodes, and Sentinel by its sentinels and master name', () => {
    const cluster = loadConfig({
      REDIS_CLUSTER_NODES: 'redis-0.redis:6379, 10.0.0.7:7001,[fd00::1]:7002',
      REDIS_TLS: 'true',
      REDIS_WAIT_REPLICAS: '1',
      REDIS_WAIT_TIMEOUT_MS: '250',
    }).redis;
    expect(cluster).toMatchObject({
      url: undefined,
      clusterNodes: [
        { host: 'redis-0.redis', port: 6379 },
        { host: '10.0.0.7', port: 7001 },
        { host: 'fd00::1', port: 7002 },
      ],
      tls: true,
      waitReplicas: 1,
      waitTimeoutMs: 250,
    });
    const sentinel = loadConfig({
      REDIS_SENTINELS: 's-0:26379,s-1:26379',
      REDIS_SENTINEL_NAME: 'edgeai',
      REDIS_SENTINEL_PASSWORD: 'sentinel-secret',
    }).redis;
    expect(sentinel).toMatchObject({
      sentinels: [
        { host: 's-0', port: 26379 },
        { host: 's-1', port: 26379 },
      ],
      sentinelName: 'edgeai',
      sentinelPassword: 'sentinel-secret',
    });
  });

  it.each([
    [{ PORT: 'eighty' }, /PORT: /],
    [{ PORT: '70000' }, /PORT: /],
    [{ BODY_LIMIT_BYTES: '0' }, /BODY_LIMIT_BYTES: /],
    [{ LOG_LEVEL: 'loud' }, /LOG_LEVEL: /],
    [{ FUNCTION_TARGET: '../etc' }, /FUNCTION_TARGET: must be a kebab-case function name/],
    [{ REDIS_URL: 'http://x' }, /REDIS_URL: /],
    [{ REDIS_KEY_PREFIX: 'no-colon' }, /REDIS_KEY_PREFIX: must be/],
    [{ REDIS_USERNAME: 'a b' }, /REDIS_USERNAME: must be/],
    [
      { REDIS_URL: 'redis://user:pw@redis:6379', REDIS_USERNAME: 'edge-worker' },
      /^REDIS_USERNAME: REDIS_URL carries credentials too/,
    ],
    [
      { REDIS_CLUSTER_NODES: 'a:1,b' },
      /^invalid configuration: REDIS_CLUSTER_NODES: entry 2 is not/,
    ],
    [{ REDIS_SENTINELS: 'a:99999' }, /REDIS_SENTINELS: entry 1 is not host:port/],
    [
      { REDIS_URL: 'redis://r:6379', REDIS_CLUSTER_NODES: 'a:1' },
      /^REDIS_URL, REDIS_CLUSTER_NODES: set only one/,
    ],
    [{ REDIS_SENTINELS: 'a:1' }, /^REDIS_SENTINEL_NAME: required with REDIS_SENTINELS/],
    [{ REDIS_URL: 'redis://r:6379', REDIS_SENTINEL_NAME: 'm' }, /^REDIS_SENTINEL_NAME: only with/],
    [{ REDIS_URL: 'redis://r:6379', REDIS_TLS: 'true' }, /^REDIS_TLS: with REDIS_URL, say TLS/],
    [{ REDIS_TLS: 'maybe' }, /REDIS_TLS: /],
    [{ REDIS_WAIT_REPLICAS: '-1' }, /REDIS_WAIT_REPLICAS: /],
  ])('names the bad variable: %o', (env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
  });

  it('refuses a password in both REDIS_URL and REDIS_PASSWORD, without echoing either', () => {
    const env = { REDIS_URL: 'redis://:in-url@redis:6379', REDIS_PASSWORD: 'in-env' };
    expect(() => loadConfig(env)).toThrow(/^REDIS_PASSWORD: REDIS_URL carries credentials too/);
    expect(() => loadConfig(env)).not.toThrow(/in-url|in-env/);
    expect(loadConfig({ REDIS_URL: env.REDIS_URL }).redis.password).toBeUndefined();
    // ioredis would take these over REDIS_PASSWORD too: a bare user (empty password), a query.
    for (const url of ['redis://user@redis:6379', 'redis://redis:6379/0?password=in-query']) {
      expect(() => loadConfig({ REDIS_URL: url, REDIS_PASSWORD: 'in-env' })).toThrow(
        /^REDIS_PASSWORD: REDIS_URL carries credentials too/,
      );
    }
  });

  it('never echoes a value, which may be a secret', () => {
    try {
      loadConfig({ REDIS_URL: 'rediss://:s3cr3t-password@host:notaport' });
      expect.unreachable();
    } catch (err) {
      expect(String(err)).toContain('REDIS_URL');
      expect(String(err)).not.toContain('s3cr3t');
    }
  });
});
