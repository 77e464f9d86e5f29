/**
 * Exactly-once effects for redelivered events. The dedupe marker (a key on the event's source
 * and id, with a TTL) and the effect run in one Lua script, so there is no window where the
 * marker exists but the effect does not (a crash there would lose the event) or the reverse (a
 * redelivery would apply it twice). Redis does not roll back a script that raises, so the effect
 * runs under pcall and a failure removes the marker again: a failed effect stays retryable.
 * (Writes an effect made before failing are not undone: effects check first, then write.)
 */
import type { RedisClient } from './client.js';
import { luaScript, runScript } from './client.js';
import { hashTag } from './keys.js';

/** Which delivery this is: the event's source and id, and the hash tag of the keys it touches. */
interface Delivery {
  source: string;
  id: string;
  /** Hash tag (without braces) shared with the effect's keys. */
  tag: string;
}

type IdempotentOutcome = { applied: true; result: unknown } | { applied: false };

/** The marker key: length-prefixed so ("a:b", "c") and ("a", "b:c") never collide. */
function deliveryKey(delivery: Delivery): string {
  const { source, id } = delivery;
  return `seen:${hashTag(delivery.tag)}:${source.length}:${source}:${id}`;
}

/**
 * Wraps `lua` (which sees its own KEYS and ARGV, as if called directly) so it runs at most once
 * per delivery within `ttlSeconds`. Returns a function that runs it and says whether it applied.
 */
function defineIdempotentScript(
  client: RedisClient,
  name: string,
  spec: { keys: number; lua: string; ttlSeconds: number },
) {
  const wrapped = [
    'local seen = table.remove(KEYS, 1)',
    'local ttl = table.remove(ARGV, 1)',
    "if not redis.call('SET', seen, '1', 'NX', 'EX', ttl) then return {0} end",
    'local function effect()',
    spec.lua,
    'end',
    'local ok, result = pcall(effect)',
    // A failed or refused effect must stay retryable: drop the marker and pass the error on.
    "local failed = not ok or (type(result) == 'table' and result.err ~= nil)",
    "if failed then redis.call('DEL', seen) end",
    "if not ok and type(result) ~= 'table' then return redis.error_reply(tostring(result)) end",
    'if failed then return result end',
    'return {1, result}',
  ].join('\n');
  const script = luaScript(spec.keys + 1, wrapped);
  const ttl = String(spec.ttlSeconds);
  const decode = (reply: unknown): IdempotentOutcome => {
    const [applied, result] = reply as [number, unknown];
    return applied === 1 ? { applied: true, result } : { applied: false };
  };
  return (
    delivery: Delivery,
    keys: readonly string[],
    args: ReadonlyArray<string | number>,
  ): Promise<IdempotentOutcome> => {
    if (keys.length !== spec.keys) {
      throw new Error(`script ${name} takes ${spec.keys} keys, got ${keys.length}`);
    }
    const argv = [deliveryKey(delivery), ...keys, ttl];
    for (const arg of args) argv.push(String(arg));
    return runScript(client, script, argv, decode);
  };
}

export { defineIdempotentScript, deliveryKey };
export type { Delivery, IdempotentOutcome };
