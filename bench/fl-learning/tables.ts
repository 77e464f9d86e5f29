/**
 * The bench's tables (bench/support/report.ts printTable): the central baseline, the learning-rate
 * grids, every condition's result with its curve's file, the poisoned comparison, FedBuff against
 * synchronous rounds, and any pending slot.
 */
import { printTable } from '../support/report.js';
import type { CentralResult } from './central.js';
import { defaultAttack, pendingConditions, poisonedComparison } from './conditions.js';
import { accuracyAt } from './curves.js';
import type { ConditionResult } from './execute.js';
import type { AsyncComparison } from './fedbuff-run.js';
import { digits } from './federation.js';
import { describeAttack } from './poisoned.js';
import type { Settings } from './settings.js';

const pct = (share: number) => `${(100 * share).toFixed(2)}%`;

function printCentral(central: CentralResult, settings: Settings, target: number): void {
  const data = digits(settings.data);
  const kept =
    data.validation === data.test
      ? 'the epoch with the best test accuracy kept: the full MNIST has no validation split'
      : `best epoch on the ${data.validation.n} validation digits kept`;
  printTable(
    `central baseline (${settings.data}): the 2NN on all ${data.train.n} training digits (Adam, batch 32, rate 0.001, ${settings.centralEpochs} epochs, seed ${settings.seed}; ${kept}), tested on ${data.test.n} digits`,
    ['best epoch', 'validation acc', 'test acc', 'target (test - points)', 'seconds'],
    [
      [
        central.bestEpoch,
        pct(central.validationAccuracy),
        pct(central.test.accuracy),
        `${pct(target)} (-${settings.targetPoints})`,
        central.ms / 1000,
      ],
    ],
  );
}

function printGrid(results: readonly ConditionResult[], settings: Settings): void {
  const rows = results.flatMap((r) =>
    r.trials.map((t) => [
      r.condition.id,
      r.serverRate === undefined ? 'eta' : 'server eta',
      t.rate,
      r.raceRounds,
      t.reachedAt ?? '-',
      pct(t.best),
      r.serverRate === undefined ? '-' : pct(accuracyAt(t.curve, settings.budget) ?? 0),
      t.diverged ? 'yes' : 'no',
      t.rate === (r.serverRate ?? r.rate) ? '<- chosen' : '',
    ]),
  );
  if (rows.length === 0) return;
  printTable(
    `learning-rate grids: local etas raced in lockstep (the first at the target wins, else the best accuracy at the race cap); server etas run to the budget of ${settings.budget} rounds (the best accuracy there wins)`,
    [
      'condition',
      'raced',
      'value',
      'race rounds',
      'target at',
      'best acc',
      `acc at ${settings.budget}`,
      'diverged',
      '',
    ],
    rows,
  );
}

function printResults(results: readonly ConditionResult[], settings: Settings): void {
  printTable(
    `rounds to the target (K=${settings.clients} clients, C=${settings.fraction}, seed ${settings.seed}; caps: FedSGD ${settings.fedsgdMaxRounds}, FedAvg ${settings.fedavgMaxRounds})`,
    [
      'condition',
      'eta',
      'rounds to target',
      'best acc',
      'rounds run',
      `acc at ${settings.budget}`,
      'seconds',
      'curve',
    ],
    results.map((r) => [
      r.condition.label,
      r.serverRate === undefined ? r.rate : `${r.rate} (server ${r.serverRate})`,
      r.reach.kind === 'reached'
        ? r.reach.rounds
        : `not reached${r.divergedAt === undefined ? '' : ` (diverged at ${r.divergedAt})`}`,
      pct(Math.max(...r.curve.map((p) => p.accuracy))),
      r.rounds,
      r.atBudget === undefined ? '-' : pct(r.atBudget),
      r.ms / 1000,
      `${r.condition.id}.svg`,
    ]),
  );
}

function printPending(): void {
  if (pendingConditions().length === 0) return;
  printTable(
    'slots: conditions of issue 32 not run yet (bench/fl-learning/conditions.ts)',
    ['condition', 'figure', 'waits for'],
    pendingConditions().map((c) => [c.id, c.figure, c.needs]),
  );
}

function printPoisoned(results: ReadonlyMap<string, ConditionResult>, settings: Settings): void {
  const ids = [poisonedComparison.clean, poisonedComparison.poisoned, ...poisonedComparison.robust];
  const rows = ids.flatMap((id) => {
    const r = results.get(id);
    if (r === undefined) return [];
    const poisoned =
      r.condition.poisoned === undefined ? 'none' : `${r.condition.poisoned.count} of 10`;
    return [
      [
        r.condition.label,
        poisoned,
        r.rate,
        r.atBudget === undefined ? `- (diverged at ${r.divergedAt ?? '?'})` : pct(r.atBudget),
        `${id}.svg`,
      ],
    ];
  });
  if (rows.length === 0) return;
  printTable(
    `poisoned trainers: ${describeAttack(settings.attack ?? defaultAttack)} (shared/fl/strategy/poison.ts), a seeded draw of 2 of each round's 10; IID, seed ${settings.seed}, accuracy after ${settings.budget} rounds`,
    ['condition', 'poisoned', 'eta', `acc at ${settings.budget}`, 'curve'],
    rows,
  );
}

function printAsync(async: AsyncComparison, settings: Settings): void {
  const { bufferSize, maxStaleness, concurrency, serverLr, slowest } = settings.fedbuff;
  const { summary, result } = async;
  const time = (t: number | undefined) => (t === undefined ? 'not reached' : t.toFixed(1));
  printTable(
    `FedBuff vs synchronous (IID, FedAvg E=5 B=10 at eta=${async.rate}, seed ${settings.seed}; trainer speeds 1x-${slowest}x evenly spread over a seeded shuffle; simulated time, 1 = a 1x local training): K=${bufferSize}, max staleness ${maxStaleness}, ${concurrency} training at once, server lr ${serverLr}, staleness weight 1/sqrt(1+s)`,
    [
      'run',
      'time to target',
      'server steps',
      'updates',
      'refused (stale)',
      'mean staleness',
      'curve',
    ],
    [
      [
        'synchronous FedAvg',
        time(summary.syncTime),
        async.syncRounds ?? '-',
        async.syncRounds === undefined ? '-' : async.syncRounds * concurrency,
        0,
        0,
        'fedbuff.svg',
      ],
      [
        `FedBuff K=${bufferSize}`,
        time(summary.asyncTime),
        summary.steps,
        summary.received,
        summary.refused,
        summary.meanStaleness,
        'fedbuff.svg',
      ],
    ],
  );
  const reasons = [
    ...new Set(result.refused.map((r) => r.reason.replace(/^update on version \d+ is /, ''))),
  ];
  if (reasons.length > 0) process.stdout.write(`refused: ${reasons.slice(0, 3).join('; ')}\n`);
}

export { printCentral, printGrid, printResults, printPending, printPoisoned, printAsync };
