/**
 * The only file that imports ioredis. The client fails fast instead of queueing: with Redis
 * down a command rejects at once (or after the command timeout) with an UnavailableError, so the
 * function answers 503 and Knative redelivers, rather than the request hanging on an offline
 * queue. Reconnection runs in the background forever; nothing needs a restart.
 */
import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';
import type { Command } from 'ioredis';
import { ConfigError, UnavailableError } from '../errors/index.js';

interface RedisConfig {
  url: string;
  /** ACL user when the URL carries none (REDIS_USERNAME); default: the server's default user. */
  username?: string | undefined;
  /** AUTH password when the URL carries none (REDIS_PASSWORD). */
  password?: string | undefined;
  keyPrefix: string;
  commandTimeoutMs: number;
  connectTimeoutMs: number;
}

/** Server replies that mean "not now" rather than "wrong command". */
const transientReplies = /^(LOADING|BUSY|MASTERDOWN|READONLY|CLUSTERDOWN|TRYAGAIN|NOREPLICAS)\b/;

/** Connection trouble and transient server states become 503s; real command errors stay. */
function classify(err: unknown): Error {
  if (!(err instanceof Error)) return new UnavailableError(`redis unavailable: ${String(err)}`);
  if (err instanceof UnavailableError) return err;
  if (err.name === 'ReplyError' && !transientReplies.test(err.message)) return err;
  return new UnavailableError(`redis unavailable: ${err.message}`, 1, { cause: err });
}

/**
 * ioredis with every command's failure classified (scripts go through here too). The command's
 * own reject is wrapped rather than its promise, which would cost a second promise per command.
 */
class GuardedRedis extends Redis {
  override sendCommand(command: Command, stream?: Parameters<Redis['sendCommand']>[1]): unknown {
    const reject = command.reject;
    command.reject = (err: Error) => reject.call(command, classify(err));
    return super.sendCommand(command, stream);
  }
}

type RedisClient = GuardedRedis;

/**
 * Creates a client that connects in the background. `onError` receives connection errors
 * (which ioredis would otherwise print to stderr on every reconnect attempt).
 */
function createRedis(config: RedisConfig, onError: (err: Error) => void): RedisClient {
  const client = new GuardedRedis(config.url, {
    ...(config.username === undefined ? {} : { username: config.username }),
    ...(config.password === undefined ? {} : { password: config.password }),
    keyPrefix: config.keyPrefix,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    autoResendUnfulfilledCommands: false,
    commandTimeout: config.commandTimeoutMs,
    connectTimeout: config.connectTimeoutMs,
    retryStrategy: (attempt) => Math.min(50 * 2 ** Math.min(attempt, 6), 2000),
    reconnectOnError: (err) => err.message.startsWith('READONLY'),
  });
  client.on('error', onError);
  return client;
}

type Warn = (fields: Record<string, unknown>, message: string) => void;

/** Where connection warnings go: a function's logger (its `warn`), or a bare callback. */
type WarningSink = { warn: Warn } | Warn;

/**
 * The client a function needs from the runtime settings: REDIS_URL is required by the caller
 * (a ConfigError names it), and connection errors become warnings in the function's log
 * (`requireRedis(config.redis, 'router', telemetry.log)`).
 */
function requireRedis(
  config: Omit<RedisConfig, 'url'> & { url: string | undefined },
  user: string,
  log: WarningSink,
): RedisClient {
  if (config.url === undefined) throw new ConfigError(`REDIS_URL: required by ${user}`);
  const warn: Warn =
    typeof log === 'function' ? log : (fields, message) => log.warn(fields, message);
  return createRedis({ ...config, url: config.url }, (err) =>
    warn({ err: err.message }, 'redis connection error'),
  );
}

/** Resolves once the client can take commands, or rejects after `timeoutMs`. */
function waitReady(client: RedisClient, timeoutMs: number): Promise<void> {
  if (client.status === 'ready') return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      client.off('ready', onReady);
      reject(new UnavailableError(`redis not ready after ${timeoutMs} ms (${client.status})`));
    }, timeoutMs);
    const onReady = () => {
      clearTimeout(timer);
      resolve();
    };
    client.once('ready', onReady);
  });
}

/** Readiness probe: ready state plus a PING round trip. */
function redisReadiness(client: RedisClient) {
  return {
    name: 'redis',
    async check(): Promise<void> {
      if (client.status !== 'ready') throw new Error(`redis connection is ${client.status}`);
      await client.ping();
    },
  };
}

/** A Lua script, addressed by its SHA-1 so the body crosses the wire once per server. */
interface LuaScript {
  readonly lua: string;
  readonly sha: string;
  readonly numberOfKeys: number;
}

function luaScript(numberOfKeys: number, lua: string): LuaScript {
  return Object.freeze({
    lua,
    numberOfKeys,
    sha: createHash('sha1').update(lua).digest('hex'),
  });
}

/**
 * Runs `script` with EVALSHA; on NOSCRIPT (a restarted or failed-over server) sends it once with
 * EVAL, which caches it again. This is what ioredis's defineCommand does, written out so the one
 * promise per call also decodes the reply: defineCommand costs one more promise and an argument
 * copy per call, on the path every Redis-backed request takes.
 * `keysAndArgs` holds the script's keys first (they get the installation prefix), then its args.
 */
function runScript<T>(
  client: RedisClient,
  script: LuaScript,
  keysAndArgs: readonly string[],
  decode: (reply: unknown) => T,
): Promise<T> {
  const argv = keysAndArgs as string[];
  return client.evalsha(script.sha, script.numberOfKeys, argv).then(decode, (err: unknown) => {
    if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
    return client.eval(script.lua, script.numberOfKeys, argv).then(decode);
  });
}

export { createRedis, requireRedis, waitReady, redisReadiness, luaScript, runScript };
export type { RedisClient, RedisConfig, LuaScript };
