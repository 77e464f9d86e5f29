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
    username: string | undefined;
    password: string | undefined;
    keyPrefix: string;
    commandTimeoutMs: number;
    connectTimeoutMs: number;
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

/** Reads the shared runtime settings (see README "Configuration" for each variable). */
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
  return {
    port: raw.PORT,
    functionTarget: raw.FUNCTION_TARGET,
    logLevel: raw.LOG_LEVEL,
    bodyLimitBytes: raw.BODY_LIMIT_BYTES,
    redis: {
      url: raw.REDIS_URL,
      username: raw.REDIS_USERNAME,
      password: raw.REDIS_PASSWORD,
      keyPrefix: raw.REDIS_KEY_PREFIX,
      commandTimeoutMs: raw.REDIS_COMMAND_TIMEOUT_MS,
      connectTimeoutMs: raw.REDIS_CONNECT_TIMEOUT_MS,
    },
    readinessTimeoutMs: raw.READINESS_TIMEOUT_MS,
  };
}

export { loadConfig, readEnv };
export type { RuntimeConfig, Env };
