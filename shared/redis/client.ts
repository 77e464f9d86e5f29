/**
 * Scripts on Redis: `luaScript` and `runScript`, and how a command's failure is classified. This
 * file does not load ioredis (its types only): the connection is connection.ts's, so a function
 * that runs no Redis (edge-infer without REDIS_URL) does not pay for loading the client at start.
 */
import { createHash } from 'node:crypto';
import { UnavailableError } from '../errors/index.js';
import type { GuardedCluster, RedisClient } from './connection.js';

/** Server replies that mean "not now" rather than "wrong command". */
// MOVED and ASK reach here only from a pipeline whose slot moved again: nothing ran, retry later.
const transientReplies =
  /^(LOADING|BUSY|MASTERDOWN|READONLY|CLUSTERDOWN|TRYAGAIN|NOREPLICAS|MOVED|ASK)\b/;

/** Connection trouble and transient server states become 503s; real command errors stay. */
function classify(err: unknown): Error {
  if (!(err instanceof Error)) return new UnavailableError(`redis unavailable: ${String(err)}`);
  if (err instanceof UnavailableError) return err;
  if (err.name === 'ReplyError' && !transientReplies.test(err.message)) return err;
  return new UnavailableError(`redis unavailable: ${err.message}`, 1, { cause: err });
}

interface Durability {
  readonly waitReplicas: number;
  readonly waitTimeoutMs: number;
}

/** Whether `client` is a Redis Cluster client (ioredis sets `isCluster` on both kinds). */
function isCluster(client: RedisClient): client is GuardedCluster {
  return client.isCluster;
}

/**
 * A Lua script, addressed by its SHA-1 so the body crosses the wire once per server. The
 * functions' scripts are .lua files (shared/redis/scripts.ts); `luaScript` itself is for tests.
 */
interface LuaScript {
  /** For messages: the script's file (`sync/offer`), or what its maker called it. */
  readonly name: string;
  readonly lua: string;
  readonly sha: string;
  readonly numberOfKeys: number;
}

function luaScript(numberOfKeys: number, lua: string, name = 'inline'): LuaScript {
  return Object.freeze({
    name,
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
 * `keysAndArgs` holds the script's keys first (they get the installation prefix), then its args
 * (binary ones as Buffers).
 *
 * With REDIS_WAIT_REPLICAS set, the script's writes are acknowledged only once that many replicas
 * have them (WAIT, on the same connection), else a 503: replication is asynchronous, and a
 * failover would lose a write the master had acknowledged. The caller's retry finds the effect
 * already applied (every script's effect is idempotent) and waits again.
 */
function runScript<T>(
  client: RedisClient,
  script: LuaScript,
  keysAndArgs: ReadonlyArray<string | Buffer>,
  decode: (reply: unknown) => T,
): Promise<T> {
  const argv = keysAndArgs as Array<string | Buffer>;
  if (client.durability.waitReplicas > 0) {
    return scriptThenWait(client, script, argv, client.durability).then(decode);
  }
  return client.evalsha(script.sha, script.numberOfKeys, argv).then(decode, (err: unknown) => {
    if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
    return client.eval(script.lua, script.numberOfKeys, argv).then(decode);
  });
}

type PipelineReply = [Error | null, unknown][] | null;

/** EVALSHA (or, on NOSCRIPT, EVAL) then WAIT, in one pipeline: to the script's master. */
async function pipelineScriptAndWait(
  client: RedisClient,
  script: LuaScript,
  argv: Array<string | Buffer>,
  { waitReplicas, waitTimeoutMs }: Durability,
): Promise<PipelineReply> {
  const send = (useSha: boolean): Promise<PipelineReply> => {
    const pipeline = client.pipeline();
    if (useSha) pipeline.evalsha(script.sha, script.numberOfKeys, argv);
    else pipeline.eval(script.lua, script.numberOfKeys, argv);
    return pipeline
      .wait(waitReplicas, waitTimeoutMs)
      .exec()
      .catch((err: unknown) => {
        throw classify(err);
      });
  };
  let results = await send(true);
  // (The reply arrives classified, as every command's failure does: "redis unavailable: MOVED …".)
  const moved = /\bMOVED (\d+) (\S+)$/.exec(results?.[0]?.[0]?.message ?? '');
  if (moved !== null && isCluster(client)) {
    // ioredis follows a pipeline's MOVED only when every command in it failed, and WAIT did not;
    // nothing ran, so do what it does for one command: note the slot's new master and resend.
    client.slots[Number(moved[1])] = [moved[2]!];
    results = await send(true);
  }
  if (results?.[0]?.[0]?.message.startsWith('NOSCRIPT') === true) results = await send(false);
  return results;
}

/** The script's reply once `durability.waitReplicas` replicas have its writes, else a 503. */
async function scriptThenWait(
  client: RedisClient,
  script: LuaScript,
  argv: Array<string | Buffer>,
  durability: Durability,
): Promise<unknown> {
  const [ran, waited] = (await pipelineScriptAndWait(client, script, argv, durability)) ?? [];
  if (ran === undefined || waited === undefined) {
    throw new UnavailableError('redis unavailable: pipeline aborted');
  }
  if (ran[0] !== null) throw classify(ran[0]);
  if (waited[0] !== null) throw classify(waited[0]);
  const replicas = Number(waited[1]);
  if (replicas < durability.waitReplicas) {
    throw new UnavailableError(
      `redis: write reached ${replicas} of ${durability.waitReplicas} replicas within ${durability.waitTimeoutMs} ms`,
    );
  }
  return ran[1];
}

export { luaScript, runScript, classify };
export type { Durability, LuaScript };
export type { RedisClient, RedisConfig, RedisSettings, HostPort } from './connection.js';
