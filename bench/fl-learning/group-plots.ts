/**
 * Which plots the bench writes: every condition's own, the group plots (each split's FedSGD
 * against FedAvg, the non-IID strategies and the poisoned aggregators to the round budget) and
 * FedBuff against synchronous rounds by simulated time.
 */
import { budgetComparison, defaultAttack, poisonedComparison } from './conditions.js';
import type { ConditionResult } from './execute.js';
import type { AsyncComparison } from './fedbuff-run.js';
import { plotByTime, plotComparison, plotCondition } from './plots.js';
import { describeAttack } from './poisoned.js';
import type { Settings } from './settings.js';

/** A group plot: the conditions of `ids` that ran, on one plot. */
interface Group {
  readonly name: string;
  readonly title: string;
  readonly ids: readonly string[];
}

/** The group plots: each split's target conditions, the non-IID budget, the poisoned. */
function groups(settings: Settings): Group[] {
  const fed = `2NN, ${settings.clients} clients, C=${settings.fraction}`;
  const attack = describeAttack(settings.attack ?? defaultAttack);
  return [
    {
      name: 'iid',
      title: `${fed}, IID`,
      ids: ['fedsgd-iid', 'fedavg-iid'],
    },
    {
      name: 'shards',
      title: `${fed}, non-IID (2 shards per client)`,
      ids: ['fedsgd-noniid', 'fedavg-noniid'],
    },
    {
      name: 'noniid-budget',
      title: `${fed}, non-IID: FedAvg, FedProx, FedAdam (${settings.budget}-round budget)`,
      ids: [budgetComparison.baseline, ...budgetComparison.contenders],
    },
    {
      name: 'poisoned',
      title: `${fed}, IID, 2 of 10 trainers ${attack} each round, against clean FedAvg`,
      ids: [poisonedComparison.clean, poisonedComparison.poisoned, ...poisonedComparison.robust],
    },
  ];
}

/** Every condition's SVG, the group plots and FedBuff's by time; returns the paths. */
async function writePlots(
  results: readonly ConditionResult[],
  settings: Settings,
  target: number,
  async: AsyncComparison | undefined,
): Promise<string[]> {
  const plotted = results.map((r) => ({
    id: r.condition.id,
    label: r.condition.label,
    rate: r.rate,
    ...(r.serverRate === undefined ? {} : { serverRate: r.serverRate }),
    curve: r.curve,
    trials: r.trials,
  }));
  const paths = [];
  for (const p of plotted) paths.push(await plotCondition(settings.out, p, target));
  for (const group of groups(settings)) {
    const same = plotted.filter((p) => group.ids.includes(p.id));
    if (same.length > 1) {
      const budgeted = group.name === 'noniid-budget' || group.name === 'poisoned';
      const cut = same.map((p) =>
        budgeted ? { ...p, curve: p.curve.filter((c) => c.round <= settings.budget) } : p,
      );
      paths.push(await plotComparison(settings.out, group.name, group.title, cut, target));
    }
  }
  if (async !== undefined) {
    const { bufferSize, maxStaleness, concurrency, slowest } = settings.fedbuff;
    paths.push(
      await plotByTime(
        settings.out,
        'fedbuff',
        `FedBuff (K=${bufferSize}, max staleness ${maxStaleness}, ${concurrency} training at once) against synchronous FedAvg, IID, trainer speeds 1x-${slowest}x, eta=${async.rate}`,
        [
          {
            name: 'synchronous FedAvg (a round waits for its slowest trainer)',
            points: async.syncCurve,
          },
          { name: `FedBuff K=${bufferSize}`, points: async.result.curve },
        ],
        target,
      ),
    );
  }
  return paths;
}

export { groups, writePlots };
export type { Group };
