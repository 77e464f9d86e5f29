/**
 * Queues the bench's worker-thread runs in an order that keeps both cores busy: the threshold
 * rule's validation runs first (its final runs wait on them), then the oracles (the longest),
 * then the static policies; each condition's alternations follow once its best static policy is
 * known, and each topology's threshold runs once its x is chosen.
 */
import { policyNames } from '../../../shared/aset/types.js';
import type { PolicyName } from '../../../shared/aset/types.js';
import { oracleLookaheads } from './conditions.js';
import type { Condition, Settings } from './conditions.js';
import { topologyNames } from './jobs.js';
import type { JobResult, Runner, TopologyName } from './jobs.js';
import type { SimPool } from './pool.js';
import { progress, successOf } from './runs.js';
import type { RunStore } from './runs.js';
import { chooseThreshold } from './threshold.js';
import type { ThresholdChoice } from './threshold.js';

interface Scheduled {
  readonly thresholds: Promise<ThresholdChoice[]>;
  /** Per condition id: its best static policy and the alternations with it (queued). */
  readonly cycles: ReadonlyMap<string, Promise<Extract<Runner, { kind: 'cycle' }>[]>>;
}

/** Counts finished runs against the plan, reporting every tenth on stderr. */
function counter(total: number, started: number) {
  let done = 0;
  let reported = 0;
  return <T>(run: Promise<T>): Promise<T> =>
    run.then((result) => {
      done += 1;
      if (done * 10 >= (reported + 1) * total) {
        reported = Math.floor((done * 10) / total);
        const s = ((performance.now() - started) / 1000).toFixed(0);
        progress(`${done}/${total} worker runs done (${s} s)`);
      }
      return result;
    });
}

/** Worker runs the plan holds, for the progress lines (each topology's validation as one). */
function plannedRuns(conditions: readonly Condition[], settings: Settings): number {
  const validation = topologyNames.length;
  const perSeed = conditions.reduce(
    (a, c) => a + policyNames.length * 2 + (c.oracles ? oracleLookaheads.length : 0),
    0,
  );
  return validation + perSeed * settings.seeds.length;
}

function schedule(
  pool: SimPool,
  conditions: readonly Condition[],
  settings: Settings,
  store: RunStore,
): Scheduled {
  const count = counter(plannedRuns(conditions, settings), performance.now());
  const submit = (condition: Condition, runner: Runner, seed: number) => {
    const { topology, load, durationMs } = condition;
    const job = { topology, seed, load, durationMs, warmupMs: 0, runner };
    store.set(condition.id, runner, seed, count(pool.run(job)));
  };
  const counted = (topology: TopologyName) =>
    count(chooseThreshold(pool, topology, settings)).then((choice) => {
      for (const condition of conditions.filter((c) => c.topology === topology)) {
        for (const seed of settings.seeds)
          submit(condition, { kind: 'threshold', x: choice.x }, seed);
      }
      return choice;
    });
  // A topology's validation (grid x loads x validation seeds) counts as one run.
  const thresholds = Promise.all(topologyNames.map(counted));
  for (const condition of conditions.filter((c) => c.oracles)) {
    for (const lookaheadWindows of [...oracleLookaheads].reverse()) {
      for (const seed of settings.seeds)
        submit(condition, { kind: 'oracle', lookaheadWindows }, seed);
    }
  }
  const cycles = new Map<string, Promise<Extract<Runner, { kind: 'cycle' }>[]>>();
  for (const condition of conditions) {
    for (const seed of settings.seeds) {
      for (const policy of policyNames) submit(condition, { kind: 'static', policy }, seed);
    }
    const queued = bestStatic(store, condition, settings.seeds).then((best) => {
      const runners = policyNames
        .filter((p) => p !== best)
        .map((p) => ({ kind: 'cycle', policies: [best, p] }) as const);
      for (const runner of runners)
        for (const seed of settings.seeds) submit(condition, runner, seed);
      return runners;
    });
    queued.catch(() => undefined);
    cycles.set(condition.id, queued);
  }
  thresholds.catch(() => undefined);
  return { thresholds, cycles };
}

async function bestStatic(
  store: RunStore,
  condition: Condition,
  seeds: readonly number[],
): Promise<PolicyName> {
  const mean = (runs: JobResult[]) => successOf(runs).reduce((a, b) => a + b, 0) / runs.length;
  let best: PolicyName = policyNames[0];
  let bestMean = -Infinity;
  for (const policy of policyNames) {
    const m = mean(await store.get(condition.id, { kind: 'static', policy }, seeds));
    if (m > bestMean) [best, bestMean] = [policy, m];
  }
  return best;
}

export { schedule };
export type { Scheduled };
