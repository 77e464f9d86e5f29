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

const recordLua = `
local stored = redis.call('HGET', KEYS[2], 'route')
if stored then return stored end
redis.call('HSET', KEYS[2], 'route', ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
for _, child in ipairs(cjson.decode(ARGV[1])) do
  redis.call('HINCRBY', KEYS[1], child .. ':routed', 1)
end
return ARGV[1]
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

interface RouteStore {
  /** Remembers `route` for `puid` unless it has one; returns the route the puid keeps. */
  record(puid: string, route: readonly string[]): Promise<string[]>;
  reward(puid: string, reward: number): Promise<RewardOutcome>;
  stats(children: readonly string[]): Promise<Map<string, ArmStats & { routed: number }>>;
}

function createRouteStore(
  redis: RedisClient,
  options: { node: string; puidTtlMs: number },
): RouteStore {
  const t = hashTag(`mlgraph:${options.node}`);
  const arms = key('mlgraph', t, 'arms');
  const puidKey = (puid: string) => key('mlgraph', t, 'puid', puid);
  return {
    async record(puid, route) {
      const stored = await runScript(
        redis,
        recordScript,
        [arms, puidKey(puid), JSON.stringify(route), String(options.puidTtlMs)],
        String,
      );
      return JSON.parse(stored) as string[];
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
      const fields = children.flatMap((c) => [`${c}:rewarded`, `${c}:reward`, `${c}:routed`]);
      const values = fields.length === 0 ? [] : await redis.hmget(arms, ...fields);
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
    },
  };
}

export { createRouteStore };
export type { RouteStore, RewardOutcome };
