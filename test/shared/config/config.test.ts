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
        password: undefined,
        keyPrefix: 'edgeai:',
        commandTimeoutMs: 1000,
        connectTimeoutMs: 2000,
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
    expect(config.redis).toEqual({
      url: 'redis://127.0.0.1:6380/2',
      username: 'edge-worker',
      password: 'pa55:word@x',
      keyPrefix: 'site-a:',
      commandTimeoutMs: 250,
      connectTimeoutMs: 300,
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
