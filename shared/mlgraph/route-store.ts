/**
 * A router node's state in Redis, shared by its replicas: the route each prediction id (puid)
 * took, kept for a while so a reward sent later reaches exactly the children that served it, and
 * per child the rewarded predictions and the sum of their rewards, which the bandit strategies
 * read. One Lua script per change: a retried prediction keeps its first route, and a reward is
 * applied once per puid however often it is resent.
 */
import { hashTag, key, luaScript, runScript } from '../redis/index.js';
import type { RedisClient } from '../redis/index.js';
import type { ArmStats } from './strategies.js';

// The arms' fields come back with the route: the router's next decision reads them instead of
// asking again (one round trip per routed request, not two).
const recordLua = `
local stored = redis.call('HGET', KEYS[2], 'route')
if not stored then
  stored = ARGV[1]
  redis.call('HSET', KEYS[2], 'route', stored)
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
  for _, child in ipairs(cjson.decode(stored)) do
    redis.call('HINCRBY', KEYS[1], child .. ':routed', 1)
  end
end
if #ARGV < 3 then return {stored, {}} end
return {stored, redis.call('HMGET', KEYS[1], unpack(ARGV, 3))}
`;

const rewardLua = `
local route = redis.call('HGET', KEYS[2], 'route')
if not route then return 'unknown' end
if redis.call('HSETNX', KEYS[2], 'reward', ARGV[1]) == 0 then return 'duplicate' end
for _, child in ipairs(cjson.decode(route)) do
  redis.call('HINCRBY', KEYS[1], child .. ':rewarded', 1)
  redis.call('HINCRBYFLOAT', KEYS[1], child .. ':reward', ARGV[1])
end
return 'applied'
`;

const recordScript = luaScript(2, recordLua);
const rewardScript = luaScript(2, rewardLua);

type RewardOutcome = 'applied' | 'duplicate' | 'unknown';

type Arms = Map<string, ArmStats & { routed: number }>;

interface RouteStore {
  /**
   * Remembers `route` for `puid` unless it has one; returns the route the puid keeps and, read in
   * the same script, the figures of `children` (after this prediction's own count).
   */
  record(
    puid: string,
    route: readonly string[],
    children?: readonly string[],
  ): Promise<{ route: string[]; arms: Arms }>;
  reward(puid: string, reward: number): Promise<RewardOutcome>;
  stats(children: readonly string[]): Promise<Arms>;
}

const armFields = (children: readonly string[]) =>
  children.flatMap((c) => [`${c}:rewarded`, `${c}:reward`, `${c}:routed`]);

/** HMGET's answer for `armFields(children)`, per child. */
function armsOf(children: readonly string[], values: ReadonlyArray<string | null>): Arms {
  return new Map(
    children.map((c, i) => [
      c,
      {
        rewarded: Number(values[3 * i] ?? 0),
        reward: Number(values[3 * i + 1] ?? 0),
        routed: Number(values[3 * i + 2] ?? 0),
      },
    ]),
  );
}

function createRouteStore(
  redis: RedisClient,
  options: { node: string; puidTtlMs: number },
): RouteStore {
  const t = hashTag(`mlgraph:${options.node}`);
  const arms = key('mlgraph', t, 'arms');
  const puidKey = (puid: string) => key('mlgraph', t, 'puid', puid);
  return {
    record(puid, route, children = []) {
      return runScript(
        redis,
        recordScript,
        [
          arms,
          puidKey(puid),
          JSON.stringify(route),
          String(options.puidTtlMs),
          ...armFields(children),
        ],
        (reply) => {
          const [stored, values] = reply as [string, Array<string | null>];
          return { route: JSON.parse(stored) as string[], arms: armsOf(children, values) };
        },
      );
    },
    reward(puid, reward) {
      return runScript(
        redis,
        rewardScript,
        [arms, puidKey(puid), String(reward)],
        (reply) => reply as RewardOutcome,
      );
    },
    async stats(children) {
      const fields = armFields(children);
      return armsOf(children, fields.length === 0 ? [] : await redis.hmget(arms, ...fields));
    },
  };
}

export { createRouteStore };
export type { Arms, RouteStore, RewardOutcome };
