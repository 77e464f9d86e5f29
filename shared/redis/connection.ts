/**
 * The only file that imports ioredis: the connection. The client fails fast instead of queueing:
 * with Redis down a command rejects at once (or after the command timeout) with an
 * UnavailableError, so the function answers 503 and Knative redelivers, rather than the request
 * hanging on an offline queue. Reconnection runs in the background forever; nothing needs a
 * restart.
 *
 * Three shapes, one client type: one Redis (a URL), Redis Cluster (seed nodes; MOVED/ASK and slot
 * refreshes are ioredis's job) and Sentinel (the master's name and the sentinels; a failover
 * reconnects to the new master). A command that may have reached a server that then went away is
 * never resent by the client: it fails with a 503 and the caller's retry meets the effect's own
 * idempotency, so nothing is applied twice.
 *
 * Scripts run through client.ts, which does not load ioredis: a function that takes no Redis
 * (edge-infer without REDIS_URL) imports the script runner, and this file only when it connects.
 */
import { Cluster, Redis } from 'ioredis';
import type { ClusterNode, ClusterOptions, Command, RedisOptions } from 'ioredis';
import { ConfigError, UnavailableError } from '../errors/index.js';
import { classify } from './client.js';
import type { Durability } from './client.js';

interface HostPort {
  host: string;
  port: number;
}

/** Where Redis is: exactly one of a URL, cluster seed nodes, or sentinels and a master name. */
type RedisLocation =
  | { url: string; clusterNodes?: undefined; sentinels?: undefined }
  | { url?: undefined; clusterNodes: readonly HostPort[]; sentinels?: undefined }
  | { url?: undefined; clusterNodes?: undefined; sentinels: readonly HostPort[] };

type RedisConfig = RedisLocation & {
  /** ACL user when the URL carries none (REDIS_USERNAME); default: the server's default user. */
  username?: string | undefined;
  /** AUTH password when the URL carries none (REDIS_PASSWORD). */
  password?: string | undefined;
  /** The master's name the sentinels know (REDIS_SENTINEL_NAME). */
  sentinelName?: string | undefined;
  /** AUTH password of the sentinels themselves (REDIS_SENTINEL_PASSWORD). */
  sentinelPassword?: string | undefined;
  /** TLS to cluster nodes and Sentinel masters (REDIS_TLS); a URL says it with rediss://. */
  tls?: boolean | undefined;
  keyPrefix: string;
  commandTimeoutMs: number;
  connectTimeoutMs: number;
  /**
   * Replicas a durable write waits for (REDIS_WAIT_REPLICAS, WAIT): 0 returns once the master
   * has it, which a failover can lose (replication is asynchronous).
   */
  waitReplicas?: number | undefined;
  waitTimeoutMs?: number | undefined;
};

/**
 * The command's own reject is wrapped rather than its promise, which would cost a second promise
 * per command. (A cluster wraps it again inside, for MOVED/ASK, and calls this one last.)
 */
function guard(command: Command): void {
  const reject = command.reject;
  command.reject = (err: Error) => reject.call(command, classify(err));
}

/** ioredis with every command's failure classified (scripts go through here too). */
class GuardedRedis extends Redis {
  durability: Durability = { waitReplicas: 0, waitTimeoutMs: 0 };
  override sendCommand(command: Command, stream?: Parameters<Redis['sendCommand']>[1]): unknown {
    guard(command);
    return super.sendCommand(command, stream);
  }
}

/** The same for Redis Cluster. */
class GuardedCluster extends Cluster {
  durability: Durability = { waitReplicas: 0, waitTimeoutMs: 0 };
  override sendCommand(
    command: Command,
    stream?: Parameters<Cluster['sendCommand']>[1],
    node?: Parameters<Cluster['sendCommand']>[2],
  ): unknown {
    guard(command);
    return super.sendCommand(command, stream, node);
  }
}

type RedisClient = GuardedRedis | GuardedCluster;

/** Settings every connection shares, whatever the shape. */
function connectionOptions(config: RedisConfig): RedisOptions {
  return {
    ...(config.username === undefined ? {} : { username: config.username }),
    ...(config.password === undefined ? {} : { password: config.password }),
    ...(config.tls === true ? { tls: {} } : {}),
    enableOfflineQueue: false,
    // 0: a command in flight when its connection drops fails at once and is not resent.
    maxRetriesPerRequest: 0,
    autoResendUnfulfilledCommands: false,
    commandTimeout: config.commandTimeoutMs,
    connectTimeout: config.connectTimeoutMs,
    retryStrategy: (attempt) => Math.min(50 * 2 ** Math.min(attempt, 6), 2000),
    // A master demoted by a failover answers READONLY: reconnect to find the new one.
    reconnectOnError: (err) => err.message.startsWith('READONLY'),
  };
}

function clusterOptions(config: RedisConfig): ClusterOptions {
  return {
    keyPrefix: config.keyPrefix,
    enableOfflineQueue: false,
    redisOptions: connectionOptions(config),
    // A command not yet sent (its node's connection is down) waits for a slot refresh and tries
    // again a few times; by then the replica has usually been promoted. Sent ones never retry.
    retryDelayOnFailover: 200,
    retryDelayOnClusterDown: 200,
    retryDelayOnTryAgain: 100,
    maxRedirections: 8,
    slotsRefreshInterval: 2000,
    clusterRetryStrategy: (attempt) => Math.min(100 * 2 ** Math.min(attempt, 5), 2000),
  };
}

function sentinelOptions(config: RedisConfig, sentinels: readonly HostPort[]): RedisOptions {
  if (config.sentinelName === undefined) {
    throw new ConfigError('REDIS_SENTINEL_NAME: required with REDIS_SENTINELS');
  }
  return {
    ...connectionOptions(config),
    keyPrefix: config.keyPrefix,
    sentinels: sentinels.map((s) => ({ ...s })),
    name: config.sentinelName,
    role: 'master',
    ...(config.sentinelPassword === undefined ? {} : { sentinelPassword: config.sentinelPassword }),
    ...(config.tls === true ? { enableTLSForSentinelMode: true } : {}),
    // No failoverDetector: a killed master closes the connection, and a demoted one answers
    // READONLY (reconnectOnError); the detector's disconnect, racing the reconnection's
    // sentinel lookup, ended clients for good in ioredis 5.11 (test/failover/downstream-sync).
    sentinelRetryStrategy: (attempt) => Math.min(100 * 2 ** Math.min(attempt, 5), 2000),
  };
}

/**
 * Creates a client that connects in the background. `onError` receives connection errors
 * (which ioredis would otherwise print to stderr on every reconnect attempt).
 */
function createRedis(config: RedisConfig, onError: (err: Error) => void): RedisClient {
  let client: RedisClient;
  if (config.clusterNodes !== undefined) {
    const seeds: ClusterNode[] = config.clusterNodes.map((n) => ({ ...n }));
    client = new GuardedCluster(seeds, clusterOptions(config));
  } else if (config.sentinels !== undefined) {
    client = new GuardedRedis(sentinelOptions(config, config.sentinels));
  } else {
    client = new GuardedRedis(config.url, {
      ...connectionOptions(config),
      keyPrefix: config.keyPrefix,
    });
  }
  client.durability = {
    waitReplicas: config.waitReplicas ?? 0,
    waitTimeoutMs: config.waitTimeoutMs ?? 0,
  };
  client.on('error', onError);
  return client;
}

type Warn = (fields: Record<string, unknown>, message: string) => void;

/** Where connection warnings go: a function's logger (its `warn`), or a bare callback. */
type WarningSink = { warn: Warn } | Warn;

/** The runtime settings' Redis part: where (at most one of the three) and how. */
type RedisSettings = Omit<RedisConfig, 'url' | 'clusterNodes' | 'sentinels'> & {
  url?: string | undefined;
  clusterNodes?: readonly HostPort[] | undefined;
  sentinels?: readonly HostPort[] | undefined;
};

/**
 * The client a function needs from the runtime settings: a Redis is required by the caller
 * (a ConfigError names the variables), and connection errors become warnings in the function's
 * log (`requireRedis(config.redis, 'router', telemetry.log)`).
 */
function requireRedis(config: RedisSettings, user: string, log: WarningSink): RedisClient {
  const { url, clusterNodes, sentinels, ...how } = config;
  let located: RedisConfig;
  if (clusterNodes !== undefined) located = { ...how, clusterNodes };
  else if (sentinels !== undefined) located = { ...how, sentinels };
  else if (url !== undefined) located = { ...how, url };
  else {
    throw new ConfigError(
      `REDIS_URL, REDIS_CLUSTER_NODES or REDIS_SENTINELS: one is required by ${user}`,
    );
  }
  const warn: Warn =
    typeof log === 'function' ? log : (fields, message) => log.warn(fields, message);
  return createRedis(located, (err) => warn({ err: err.message }, 'redis connection error'));
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

export { createRedis, requireRedis, waitReady, redisReadiness };
export type { GuardedCluster };
export type { RedisClient, RedisConfig, RedisSettings, HostPort };
