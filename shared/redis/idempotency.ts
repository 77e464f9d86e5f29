/**
 * Exactly-once effects for redelivered events. The dedupe marker (SET NX EX on the event's
 * source and id) and the effect run in one Lua script, so there is no window where the marker
 * exists but the effect does not (a crash there would lose the event) or the reverse (a
 * redelivery would apply it twice).
 */
import type { RedisClient } from './client.js';
import { scriptRunner } from './client.js';
import { hashTag, key } from './keys.js';

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
  return key(
    'seen',
    hashTag(delivery.tag),
    `${delivery.source.length}`,
    delivery.source,
    delivery.id,
  );
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
    'return {1, effect()}',
  ].join('\n');
  const run = scriptRunner(client, name, spec.keys + 1, wrapped);
  return async (
    delivery: Delivery,
    keys: readonly string[],
    args: ReadonlyArray<string | number>,
  ): Promise<IdempotentOutcome> => {
    const reply = (await run(
      [deliveryKey(delivery), ...keys],
      [spec.ttlSeconds, ...args],
    )) as unknown[];
    return reply[0] === 1 ? { applied: true, result: reply[1] } : { applied: false };
  };
}

export { defineIdempotentScript, deliveryKey };
export type { Delivery, IdempotentOutcome };
