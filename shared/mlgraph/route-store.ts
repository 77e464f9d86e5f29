/**
 * A router node's state in Redis, shared by its replicas: the route each prediction id (puid)
 * took, kept for a while so a reward sent later reaches exactly the children that served it, and
 * per child the rewarded predictions and the sum of their rewards, which the bandit strategies
 * read. One Lua script per change (lua/route-*.lua): a retried prediction keeps its first route,
 * and a reward is applied once per puid however often it is resent.
 */
import { hashTag, key, runScript } from '../redis/index.js';
import type { RedisClient } from '../redis/index.js';
import { routeRecord, routeReward } from './lua/index.js';
import type { ArmStats } from './strategies.js';

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
        routeRecord,
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
        routeReward,
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
