/**
 * The hindsight references of one condition: every static policy and the 4-window-lookahead
 * oracle on the same seeds, counted as the condition says. Their gap is the margin any
 * per-window switcher could hope for there; the deviation trials then ask how much of it a
 * controller that reads the state can claim.
 */
import { policyNames } from '../../../shared/aset/types.js';
import type { PolicyName } from '../../../shared/aset/types.js';
import type { JobResult, Runner, TopologyName } from '../aset-sim/jobs.js';
import type { SimPool } from '../aset-sim/pool.js';
import { meanCi } from '../aset-sim/stats.js';
import type { MeanCi } from '../aset-sim/stats.js';
import type { Condition } from './conditions.js';

const windowMs = 25_000;
const durationMs = 600_000;
const lookaheadWindows = 4;

interface References {
  /** Success % per static policy, per seed (seeds in order). */
  readonly statics: Readonly<Record<PolicyName, number[]>>;
  /** The static policy with the best mean over the seeds. */
  readonly bestStatic: PolicyName;
  /** Per seed, the best static policy's success in hindsight of that seed. */
  readonly perSeedBest: number[];
  readonly oracle: number[];
  /** Oracle minus the best static policy, paired by seed, points. */
  readonly oracleGap: MeanCi;
}

const successPercent = (r: JobResult) =>
  (100 * r.counted.success) / (r.counted.success + r.counted.qosFailure + r.counted.rejected);

async function measureReferences(
  pool: SimPool,
  topology: TopologyName,
  condition: Condition,
  seeds: readonly number[],
): Promise<References> {
  const run = (seed: number, runner: Runner) =>
    pool
      .run({
        topology,
        seed,
        load: condition.load,
        durationMs,
        warmupMs: condition.warmupWindows * windowMs,
        runner,
      })
      .then(successPercent);
  // The oracles first: they are the longest jobs, so both threads stay busy to the end.
  const oracle = Promise.all(seeds.map((seed) => run(seed, { kind: 'oracle', lookaheadWindows })));
  const staticRuns = policyNames.map((policy) =>
    Promise.all(seeds.map((seed) => run(seed, { kind: 'static', policy }))),
  );
  const statics = Object.fromEntries(
    (await Promise.all(staticRuns)).map((values, i) => [policyNames[i]!, values]),
  ) as Record<PolicyName, number[]>;
  const mean = (values: readonly number[]) => values.reduce((a, b) => a + b, 0) / values.length;
  const bestStatic = policyNames.reduce((best, p) =>
    mean(statics[p]) > mean(statics[best]) ? p : best,
  );
  const oracleSuccess = await oracle;
  return {
    statics,
    bestStatic,
    perSeedBest: seeds.map((_, i) => Math.max(...policyNames.map((p) => statics[p][i]!))),
    oracle: oracleSuccess,
    oracleGap: meanCi(oracleSuccess.map((v, i) => v - statics[bestStatic][i]!)),
  };
}

export { measureReferences, lookaheadWindows };
export type { References };
