/**
 * A router node of an ML graph (the route contract): every predict request is answered with its
 * payload unchanged and the children it should go to, and a reward for a prediction id updates
 * the figures of the children that prediction went to. With a learning strategy a prediction id
 * keeps its first route, so a retried request (same `mlgraph-puid`, or the same CloudEvent)
 * goes the same way and is counted once; the other strategies keep nothing per prediction.
 */
import { randomUUID } from 'node:crypto';
import { NotFoundError } from '../errors/index.js';
import type { Arms, RewardOutcome, RouteStore } from './route-store.js';
import { learns, route } from './strategies.js';
import type { ArmStats } from './strategies.js';
import type { Strategy } from '../crds/route-strategy.js';
import type { ArmCosts } from '../messages/mlgraph.js';
import { armCostsOf } from './arm-costs.js';

interface Router {
  /**
   * The children for this request and the prediction id it is known by from now on. A `fresh`
   * id (just made by the caller: no earlier route can exist for it) is routed at once, its
   * route written meanwhile: `recorded` settles when it is kept (await it before answering, so
   * that a reward can find it). Otherwise the route is kept (or an earlier one read) first.
   */
  predict(input: {
    puid: string | undefined;
    body: unknown;
    fresh?: boolean;
  }): Promise<{ puid: string; route: string[]; recorded?: Promise<void> }>;
  /** Applies a reward once per prediction id; NotFoundError when the id is unknown or expired. */
  reward(puid: string, reward: number): Promise<Exclude<RewardOutcome, 'unknown'> | 'ignored'>;
  arms(): Promise<{
    strategy: Strategy['kind'];
    children: Array<{
      name: string;
      routed: number;
      rewarded: number;
      meanReward: number | null;
      /** What choosing the child costs now, in the reward's units (when costs are declared). */
      cost?: number;
    }>;
  }>;
}

/**
 * How old the arms' figures a bandit decides on may be. Each routed request's record brings them
 * back fresh, so under traffic a decision costs one round trip to Redis, not two; after a quiet
 * second they are read again. (A bandit's rewards arrive later than its decisions anyway.)
 */
const armsMaxAgeMs = 1_000;

function createRouter(deps: {
  strategy: Strategy;
  children: readonly string[];
  store: RouteStore;
  uniform: () => number;
  normal: () => number;
  /** What choosing each child costs a bandit (arm-costs.ts). */
  costs?: ArmCosts | undefined;
  /** A child's measured latency in seconds, for `perLatencySecond` costs. */
  latency?: (child: string) => number | undefined;
  newPuid?: () => string;
  now?: () => number;
}): Router {
  const { strategy, children, store } = deps;
  const costsNow = armCostsOf(children, deps.costs, deps.latency);
  const bandit = learns(strategy);
  const newPuid = deps.newPuid ?? randomUUID;
  const now = deps.now ?? Date.now;
  let latest: { arms: Arms; at: number } | undefined;
  const armsNow = async (): Promise<ReadonlyMap<string, ArmStats>> => {
    if (!bandit) return new Map();
    if (latest !== undefined && now() - latest.at < armsMaxAgeMs) return latest.arms;
    const arms = await store.stats(children);
    latest = { arms, at: now() };
    return arms;
  };
  return {
    async predict({ puid, body, fresh = false }) {
      const id = puid ?? newPuid();
      const chosen = route(strategy, children, {
        body,
        stats: await armsNow(),
        costs: costsNow(),
        uniform: deps.uniform,
        normal: deps.normal,
      });
      // Only a learning strategy needs the route back for a reward: the others write nothing.
      if (!bandit) return { puid: id, route: chosen };
      const record = () =>
        store.record(id, chosen, children).then((recorded) => {
          latest = { arms: recorded.arms, at: now() };
          return recorded.route;
        });
      // A new id has no earlier route to keep: it goes now, and its route is written once the
      // calls it leads to are out (setImmediate: after this turn's writes), while they run.
      if (fresh) {
        const recorded = new Promise<void>((resolve) => setImmediate(resolve)).then(record);
        return { puid: id, route: chosen, recorded: recorded.then(() => undefined) };
      }
      return { puid: id, route: await record() };
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
      const costs = costsNow();
      return {
        strategy: strategy.kind,
        children: children.map((name) => {
          const arm = stats.get(name) ?? { routed: 0, rewarded: 0, reward: 0 };
          const cost = costs?.get(name);
          return {
            name,
            routed: arm.routed,
            rewarded: arm.rewarded,
            meanReward: arm.rewarded === 0 ? null : arm.reward / arm.rewarded,
            ...(cost === undefined ? {} : { cost: Number(cost.toPrecision(6)) }),
          };
        }),
      };
    },
  };
}

export { createRouter };
export type { Router };
