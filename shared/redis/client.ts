/**
 * The only file that imports ioredis. The client fails fast instead of queueing: with Redis
 * down a command rejects at once (or after the command timeout) with an UnavailableError, so the
 * function answers 503 and Knative redelivers, rather than the request hanging on an offline
 * queue. Reconnection runs in the background forever; nothing needs a restart.
 */
import { Redis } from 'ioredis';
import type { Command } from 'ioredis';
import { UnavailableError } from '../errors/index.js';

interface RedisConfig {
  url: string;
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

type ScriptMethod = (
  this: RedisClient,
  ...keysThenArgs: Array<string | number>
) => Promise<unknown>;

/** Registers `lua` once with defineCommand (EVALSHA, EVAL on NOSCRIPT) and returns the method. */
function defineScript(
  client: RedisClient,
  name: string,
  numberOfKeys: number,
  lua: string,
): ScriptMethod {
  client.defineCommand(name, { numberOfKeys, lua });
  const method = (client as unknown as Record<string, unknown>)[name];
  if (typeof method !== 'function') throw new Error(`script ${name} was not defined`);
  return method as ScriptMethod;
}

/** A script runner taking its keys and arguments apart, checked against its key count. */
function scriptRunner(client: RedisClient, name: string, numberOfKeys: number, lua: string) {
  const method = defineScript(client, name, numberOfKeys, lua);
  return (keys: readonly string[], args: ReadonlyArray<string | number>): Promise<unknown> => {
    if (keys.length !== numberOfKeys) {
      throw new Error(`script ${name} takes ${numberOfKeys} keys, got ${keys.length}`);
    }
    return method.apply(client, [...keys, ...args]);
  };
}

export { createRedis, waitReady, redisReadiness, defineScript, scriptRunner };
export type { RedisClient, RedisConfig };
