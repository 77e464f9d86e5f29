/**
 * Exactly-once effects for redelivered events. The dedupe marker (a key on the event's source
 * and id, with a TTL) and the effect run in one Lua script (lua/idempotent.lua), so there is no
 * window where the marker exists but the effect does not (a crash there would lose the event) or
 * the reverse (a redelivery would apply it twice); a failed effect removes the marker again, so
 * it stays retryable.
 */
import type { LuaScript, RedisClient } from './client.js';
import { luaScript, runScript } from './client.js';
import { hashTag } from './keys.js';
import { idempotent } from './lua/index.js';

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
 * The script that runs `effect` at most once per delivery: lua/idempotent.lua with the effect's
 * script in place of its `-- @effect` line. It takes the marker key, then the effect's keys.
 */
function idempotentScript(effect: LuaScript): LuaScript {
  const parts = idempotent.lua.split(/^-- @effect$/m);
  if (parts.length !== 2) throw new Error('idempotent.lua: not one -- @effect line');
  const lua = `${parts[0]}${effect.lua}${parts[1]}`;
  return luaScript(
    idempotent.numberOfKeys + effect.numberOfKeys,
    lua,
    `idempotent(${effect.name})`,
  );
}

/**
 * Runs `effect` (a script that sees its own KEYS and ARGV, as if called directly) at most once
 * per delivery within `ttlSeconds`. Returns a function that runs it and says whether it applied.
 */
function defineIdempotentScript(
  client: RedisClient,
  effect: LuaScript,
  options: { ttlSeconds: number },
) {
  const script = idempotentScript(effect);
  const ttl = String(options.ttlSeconds);
  const decode = (reply: unknown): IdempotentOutcome => {
    const [applied, result] = reply as [number, unknown];
    return applied === 1 ? { applied: true, result } : { applied: false };
  };
  return (
    delivery: Delivery,
    keys: readonly string[],
    args: ReadonlyArray<string | number>,
  ): Promise<IdempotentOutcome> => {
    if (keys.length !== effect.numberOfKeys) {
      throw new Error(
        `script ${effect.name} takes ${effect.numberOfKeys} keys, got ${keys.length}`,
      );
    }
    const argv = [deliveryKey(delivery), ...keys, ttl];
    for (const arg of args) argv.push(String(arg));
    return runScript(client, script, argv, decode);
  };
}

export { defineIdempotentScript, deliveryKey, idempotentScript };
export type { Delivery, IdempotentOutcome };
