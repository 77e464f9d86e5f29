/**
 * A router node of an ML graph (the route contract): every predict request is answered with its
 * payload unchanged and the children it should go to, and a reward for a prediction id updates
 * the figures of the children that prediction went to. With a learning strategy a prediction id
 * keeps its first route, so a retried request (same `mlgraph-puid`, or the same CloudEvent)
 * goes the same way and is counted once; the other strategies keep nothing per prediction.
 */
import { randomUUID } from 'node:crypto';
import { NotFoundError } from '../errors/index.js';
import type { RewardOutcome, RouteStore } from './route-store.js';
import { learns, route } from './strategies.js';
import type { ArmStats } from './strategies.js';
import type { Strategy } from '../crds/route-strategy.js';

interface Router {
  /** The children for this request and the prediction id it is known by from now on. */
  predict(input: {
    puid: string | undefined;
    body: unknown;
  }): Promise<{ puid: string; route: string[] }>;
  /** Applies a reward once per prediction id; NotFoundError when the id is unknown or expired. */
  reward(puid: string, reward: number): Promise<Exclude<RewardOutcome, 'unknown'> | 'ignored'>;
  arms(): Promise<{
    strategy: Strategy['kind'];
    children: Array<{ name: string; routed: number; rewarded: number; meanReward: number | null }>;
  }>;
}

function createRouter(deps: {
  strategy: Strategy;
  children: readonly string[];
  store: RouteStore;
  uniform: () => number;
  normal: () => number;
  newPuid?: () => string;
}): Router {
  const { strategy, children, store } = deps;
  const bandit = learns(strategy);
  const newPuid = deps.newPuid ?? randomUUID;
  return {
    async predict({ puid, body }) {
      const id = puid ?? newPuid();
      const stats = bandit ? await store.stats(children) : new Map<string, ArmStats>();
      const chosen = route(strategy, children, {
        body,
        stats,
        uniform: deps.uniform,
        normal: deps.normal,
      });
      // Only a learning strategy needs the route back for a reward: the others write nothing.
      return { puid: id, route: bandit ? await store.record(id, chosen) : chosen };
    },
    async reward(puid, reward) {
      if (!bandit) return 'ignored';
      const outcome = await store.reward(puid, reward);
      if (outcome === 'unknown') {
        throw new NotFoundError(
          `prediction ${puid} is unknown here: never routed by this node, or its route expired`,
        );
      }
      return outcome;
    },
    async arms() {
      const stats = await store.stats(children);
      return {
        strategy: strategy.kind,
        children: children.map((name) => {
          const arm = stats.get(name)!;
          return {
            name,
            routed: arm.routed,
            rewarded: arm.rewarded,
            meanReward: arm.rewarded === 0 ? null : arm.reward / arm.rewarded,
          };
        }),
      };
    },
  };
}

export { createRouter };
export type { Router };
