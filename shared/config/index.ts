/**
 * Configuration is read once, from environment variables, at start-up: a typo in a variable
 * fails the process immediately with a ConfigError naming that variable, instead of surfacing
 * as a strange failure on the first request.
 */
import { z } from 'zod';
import { ConfigError } from '../errors/index.js';
import { describeIssues } from '../schema/index.js';

type Env = Readonly<Record<string, string | undefined>>;

/** Whole number of at least `min`, read from a string variable. */
const integer = (min: number) => z.coerce.number().int().min(min);

/** `host:port,host:port` (an IPv6 host in brackets), as REDIS_CLUSTER_NODES and REDIS_SENTINELS. */
const hostPorts = z.string().transform((text, ctx) => {
  const nodes: Array<{ host: string; port: number }> = [];
  for (const [index, item] of text.split(',').entries()) {
    const match = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(item.trim());
    const port = Number(match?.[2]);
    if (match === null || port < 1 || port > 65535) {
      // The position, not the text: whatever was pasted there is not echoed.
      ctx.addIssue({ code: 'custom', message: `entry ${index + 1} is not host:port` });
      return z.NEVER;
    }
    nodes.push({ host: match[1]!.replace(/^\[|\]$/g, ''), port });
  }
  return nodes;
});

const logLevels = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

const runtimeSchema = z.object({
  PORT: integer(0).max(65535).default(8080),
  FUNCTION_TARGET: z
    .string()
    .regex(/^[a-z][a-z0-9-]{0,62}$/, 'must be a kebab-case function name')
    .optional(),
  LOG_LEVEL: z.enum(logLevels).default('info'),
  BODY_LIMIT_BYTES: integer(1).default(1024 * 1024),
  REDIS_URL: z.url({ protocol: /^rediss?$/ }).optional(),
  // Kept apart from REDIS_URL so the URL can sit in a ConfigMap and the password in a Secret.
  REDIS_PASSWORD: z.string().optional(),
  // An ACL user (edge workers get a restricted one); unset, the server's default user.
  REDIS_USERNAME: z
    .string()
    .regex(/^[A-Za-z0-9_.-]{1,64}$/, 'must be 1-64 of [A-Za-z0-9_.-]')
    .optional(),
  REDIS_KEY_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_.-]{1,64}:$/, 'must be 1-64 of [A-Za-z0-9_.-] followed by ":"')
    .default('edgeai:'),
  // Redis Cluster: seed nodes (any few; the client learns the rest), instead of REDIS_URL.
  REDIS_CLUSTER_NODES: hostPorts.optional(),
  // Sentinel: the sentinels and the name of the master they watch, instead of REDIS_URL.
  REDIS_SENTINELS: hostPorts.optional(),
  REDIS_SENTINEL_NAME: z
    .string()
    .regex(/^[A-Za-z0-9_.-]{1,64}$/, 'must be 1-64 of [A-Za-z0-9_.-]')
    .optional(),
  REDIS_SENTINEL_PASSWORD: z.string().optional(),
  // TLS to cluster nodes or Sentinel masters (a URL says it with rediss://).
  REDIS_TLS: z.stringbool().default(false),
  // Durable writes wait until this many replicas have them (WAIT); 0: the master's ack.
  REDIS_WAIT_REPLICAS: integer(0).max(16).default(0),
  REDIS_WAIT_TIMEOUT_MS: integer(1).default(500),
  REDIS_COMMAND_TIMEOUT_MS: integer(1).default(1000),
  REDIS_CONNECT_TIMEOUT_MS: integer(1).default(2000),
  READINESS_TIMEOUT_MS: integer(1).default(1000),
});

/** The settings every function process shares. */
interface RuntimeConfig {
  port: number;
  functionTarget: string | undefined;
  logLevel: (typeof logLevels)[number];
  bodyLimitBytes: number;
  redis: {
    url: string | undefined;
    clusterNodes: Array<{ host: string; port: number }> | undefined;
    sentinels: Array<{ host: string; port: number }> | undefined;
    sentinelName: string | undefined;
    sentinelPassword: string | undefined;
    tls: boolean;
    username: string | undefined;
    password: string | undefined;
    keyPrefix: string;
    commandTimeoutMs: number;
    connectTimeoutMs: number;
    waitReplicas: number;
    waitTimeoutMs: number;
  };
  readinessTimeoutMs: number;
}

/**
 * Validates the variables named by `schema`'s keys; the ConfigError lists each bad variable
 * with what is wrong (never its value, which may be a secret).
 */
function readEnv<S extends z.ZodObject>(schema: S, env: Env): z.output<S> {
  const picked: Record<string, string | undefined> = {};
  for (const name of Object.keys(schema.shape)) {
    const value = env[name];
    picked[name] = value === '' ? undefined : value;
  }
  const result = schema.safeParse(picked);
  if (result.success) return result.data;
  // Each issue is named by its variable alone: the path is the variable's name.
  const problems = describeIssues(result.error.issues, (name) => name);
  throw new ConfigError(`invalid configuration: ${problems}`);
}

/** One place says where Redis is, and the settings of another shape are not silently ignored. */
function checkRedisLocation(raw: z.output<typeof runtimeSchema>): void {
  const given = (['REDIS_URL', 'REDIS_CLUSTER_NODES', 'REDIS_SENTINELS'] as const).filter(
    (name) => raw[name] !== undefined,
  );
  if (given.length > 1) {
    throw new ConfigError(`${given.join(', ')}: set only one (where Redis is)`);
  }
  if (raw.REDIS_SENTINELS !== undefined && raw.REDIS_SENTINEL_NAME === undefined) {
    throw new ConfigError('REDIS_SENTINEL_NAME: required with REDIS_SENTINELS (the master name)');
  }
  if (raw.REDIS_SENTINELS === undefined) {
    for (const name of ['REDIS_SENTINEL_NAME', 'REDIS_SENTINEL_PASSWORD'] as const) {
      if (raw[name] !== undefined) throw new ConfigError(`${name}: only with REDIS_SENTINELS`);
    }
  }
  if (raw.REDIS_TLS && raw.REDIS_URL !== undefined) {
    throw new ConfigError('REDIS_TLS: with REDIS_URL, say TLS with rediss://');
  }
}

/** Reads the shared runtime settings (docs/configuration.md "Every function" names each variable). */
function loadConfig(env: Env = process.env): RuntimeConfig {
  const raw = readEnv(runtimeSchema, env);
  // ioredis silently prefers credentials in the URL — a user name alone (then with an empty
  // password) or a `password` query parameter included; two sources of one secret is a mistake.
  const separate = raw.REDIS_PASSWORD !== undefined || raw.REDIS_USERNAME !== undefined;
  if (separate && raw.REDIS_URL !== undefined) {
    const url = new URL(raw.REDIS_URL);
    if (url.username !== '' || url.password !== '' || url.searchParams.has('password')) {
      const name = raw.REDIS_PASSWORD !== undefined ? 'REDIS_PASSWORD' : 'REDIS_USERNAME';
      throw new ConfigError(
        `${name}: REDIS_URL carries credentials too (user, password or ?password=); set only one`,
      );
    }
  }
  checkRedisLocation(raw);
  return {
    port: raw.PORT,
    functionTarget: raw.FUNCTION_TARGET,
    logLevel: raw.LOG_LEVEL,
    bodyLimitBytes: raw.BODY_LIMIT_BYTES,
    redis: {
      url: raw.REDIS_URL,
      clusterNodes: raw.REDIS_CLUSTER_NODES,
      sentinels: raw.REDIS_SENTINELS,
      sentinelName: raw.REDIS_SENTINEL_NAME,
      sentinelPassword: raw.REDIS_SENTINEL_PASSWORD,
      tls: raw.REDIS_TLS,
      username: raw.REDIS_USERNAME,
      password: raw.REDIS_PASSWORD,
      keyPrefix: raw.REDIS_KEY_PREFIX,
      commandTimeoutMs: raw.REDIS_COMMAND_TIMEOUT_MS,
      connectTimeoutMs: raw.REDIS_CONNECT_TIMEOUT_MS,
      waitReplicas: raw.REDIS_WAIT_REPLICAS,
      waitTimeoutMs: raw.REDIS_WAIT_TIMEOUT_MS,
    },
    readinessTimeoutMs: raw.READINESS_TIMEOUT_MS,
  };
}

export { loadConfig, readEnv };
export type { RuntimeConfig, Env };
