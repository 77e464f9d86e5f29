/**
 * The threshold rule's x, chosen per topology on the validation seeds (51-56, never the final
 * seeds): for each x of the grid, lambda = 60 and a random schedule (the seed's own), 600 s from
 * empty; the x with the best mean success over both loads and all seeds is kept.
 */
import { printTable } from '../../../bench/support/report.js';
import { thresholdGrid, validationMs } from './conditions.js';
import type { Settings } from './conditions.js';
import type { JobResult, Load, TopologyName } from './jobs.js';
import type { SimPool } from './pool.js';
import { successOf } from './runs.js';

interface ThresholdChoice {
  readonly topology: TopologyName;
  readonly x: number;
  /** Mean success % over the validation runs, per x of the grid. */
  readonly means: readonly number[];
}

const validationLoads: readonly Load[] = [{ kind: 'constant', lambda: 60 }, { kind: 'random' }];

/** Queues the topology's validation runs on `pool` and resolves with the chosen x. */
async function chooseThreshold(
  pool: SimPool,
  topology: TopologyName,
  settings: Settings,
): Promise<ThresholdChoice> {
  const durationMs = validationMs(settings);
  const perX = thresholdGrid.map((x) =>
    Promise.all(
      validationLoads.flatMap((load) =>
        settings.validationSeeds.map((seed): Promise<JobResult> =>
          pool.run({
            topology,
            seed,
            load,
            durationMs,
            warmupMs: 0,
            runner: { kind: 'threshold', x },
          }),
        ),
      ),
    ),
  );
  const means = (await Promise.all(perX)).map((runs) => {
    const values = successOf(runs);
    return values.reduce((a, b) => a + b, 0) / values.length;
  });
  let best = 0;
  for (let i = 1; i < means.length; i += 1) if (means[i]! > means[best]!) best = i;
  return { topology, x: thresholdGrid[best]!, means };
}

function printThresholdChoices(choices: readonly ThresholdChoice[], settings: Settings): void {
  printTable(
    `threshold rule (least impedance below edge utilisation x, farthest above): mean success % on validation seeds ${settings.validationSeeds.join(', ')}, lambda 60 and a random schedule, ${validationMs(settings) / 1000} s from empty`,
    ['topology', ...thresholdGrid.map((x) => `x = ${x}`), 'chosen x'],
    choices.map((c) => [c.topology, ...c.means.map((m) => m.toFixed(2)), String(c.x)]),
  );
  const overlap = settings.seeds.filter((s) => settings.validationSeeds.includes(s));
  if (overlap.length > 0) {
    process.stdout.write(
      `WARNING: the evaluation seeds include validation seeds ${overlap.join(', ')}: the threshold rule was tuned on them\n`,
    );
  }
}

export { chooseThreshold, printThresholdChoices };
export type { ThresholdChoice };
