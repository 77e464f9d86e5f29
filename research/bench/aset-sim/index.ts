/**
 * research/bench/aset-sim: issue 20's final table, the ASET paper's simulated evaluation
 * (section V, figures 4-7) on our three topologies. Every run goes through `runControlled`
 * (research/aset/sim/episode.ts), the loop the training and the function use, with T = 25 s,
 * starts from an empty system and is counted from t = 0 (the paper plots "every moment of the
 * simulation"). Constant-lambda runs last 600 s, both patterns 1,050 s.
 *
 * Conditions (conditions.ts): lambda = 60 on dc-cloud, co-dc-cloud and full-edge; the lambda sweep
 * 20..100 on full-edge and co-dc-cloud; the burst (20 / 60 / 100 every 150 s) and falling
 * (60 / 40 / 20 / 30 / 40 / 50 / 60 every 150 s) patterns on full-edge.
 *
 * Runners per condition: the seven static policies; ASET (the deployed controller of models/, on
 * the main thread; where a static policy was deployed, also the network itself at lambda = 60);
 * the best two-policy alternation (the condition's best static policy alternated window by window
 * with each other policy, the best of the six, in hindsight); the threshold rule (least impedance
 * below edge utilisation x, farthest above; x chosen per topology on validation seeds 51-56,
 * threshold.ts); the greedy oracle and the 4-window-lookahead oracle (lambda = 60 and the
 * patterns; on the sweep only with --sweep-oracles). Each condition's table gives success /
 * QoS-failure / rejection %, mean ± 95% Student-t interval over the seeds, and success minus the
 * best static policy (best mean over these seeds, in hindsight), paired by seed (tables.ts). The
 * final JSON's figures and targets are issue 20's "Must show" (figures.ts).
 *
 * Seeds 201..(200 + n), touched only for this table: `npm run aset:train` trains on seeds 1..P
 * and selects on 51-56; the bench refuses a model whose training or validation seeds overlap the
 * evaluation seeds. A missing model stops the bench with the command that trains it.
 *
 * Options: --seeds N (default 20), --first-seed S (default 201; for validation-style runs),
 * --static-only (no ASET rows; only the speed target), --workers N (threads for the non-ASET runs;
 * default min(2, cores); 0 runs everything in this thread), --models DIR (default models/),
 * --sweep-oracles (both oracles on the sweep too). Hidden: --quick (durations / 4, validation on
 * seeds 51-52), a smoke test whose numbers mean nothing.
 */
import { relative } from 'node:path';
import { policyNames } from '../../../shared/aset/types.js';
import { finish, median, printTable } from '../../../bench/support/report.js';
import { runAset, trainedModels } from './aset.js';
import type { TrainedNetwork } from './aset.js';
import { conditionsOf, oracleLookaheads, settingsFrom } from './conditions.js';
import type { Condition, Settings } from './conditions.js';
import { headline } from './figures.js';
import { repoRoot } from './jobs.js';
import type { TopologyName } from './jobs.js';
import { plotCondition } from './plots.js';
import { SimPool } from './pool.js';
import { RunStore, progress } from './runs.js';
import { schedule } from './schedule.js';
import type { Scheduled } from './schedule.js';
import { reportCondition } from './tables.js';
import type { ConditionRuns, ConditionSummary } from './tables.js';
import { printThresholdChoices } from './threshold.js';

/** Everything the condition's table needs, once its runs are in. */
async function gather(
  condition: Condition,
  settings: Settings,
  store: RunStore,
  scheduled: Scheduled,
  models: ReadonlyMap<TopologyName, TrainedNetwork>,
): Promise<ConditionRuns> {
  const { id } = condition;
  const { seeds } = settings;
  const statics = new Map(
    await Promise.all(
      policyNames.map(
        async (p) => [p, await store.get(id, { kind: 'static', policy: p }, seeds)] as const,
      ),
    ),
  );
  const choice = (await scheduled.thresholds).find((c) => c.topology === condition.topology)!;
  const cycleRunners = await scheduled.cycles.get(id)!;
  const deployed = models.get(condition.topology)?.card.deployed;
  return {
    statics,
    threshold: {
      x: choice.x,
      runs: await store.get(id, { kind: 'threshold', x: choice.x }, seeds),
    },
    cycles: await Promise.all(
      cycleRunners.map(async (r) => ({
        policies: r.policies,
        runs: await store.get(id, r, seeds),
      })),
    ),
    oracles: condition.oracles
      ? await Promise.all(
          oracleLookaheads.map(async (lookaheadWindows) => ({
            lookahead: lookaheadWindows,
            runs: await store.get(id, { kind: 'oracle', lookaheadWindows }, seeds),
          })),
        )
      : [],
    ...(deployed === undefined
      ? {}
      : {
          aset: {
            label:
              deployed.kind === 'static'
                ? `ASET (deployed: ${deployed.policy}, which beat the network on validation)`
                : 'ASET',
            runs: await store.get(id, 'aset', seeds),
          },
        }),
    ...(store.has(id, 'aset-network', seeds[0]!)
      ? { network: await store.get(id, 'aset-network', seeds) }
      : {}),
  };
}

/** Simulated / wall seconds of the full-edge static runs at lambda = 60 (median). */
async function speedOf(store: RunStore, seeds: readonly number[]): Promise<number> {
  const runs = await Promise.all(
    policyNames.map((policy) =>
      store.get('full-edge-lambda-60', { kind: 'static', policy }, seeds),
    ),
  );
  const speeds = runs.flat().map((r) => r.simulatedMs / r.wallMs);
  printTable(
    'simulation speed (runs share the cores with each other and the ASET runs)',
    ['figure', 'value'],
    [
      [
        `full-edge, lambda 60, static policies: simulated s / wall s (median of ${speeds.length} runs)`,
        median(speeds).toFixed(0),
      ],
    ],
  );
  return median(speeds);
}

async function report(
  conditions: readonly Condition[],
  settings: Settings,
  store: RunStore,
  scheduled: Scheduled,
  models: ReadonlyMap<TopologyName, TrainedNetwork>,
): Promise<{ summaries: ConditionSummary[]; plots: string[] }> {
  const out = new URL('out/', repoRoot());
  printThresholdChoices(await scheduled.thresholds, settings);
  const summaries: ConditionSummary[] = [];
  const plots: string[] = [];
  for (const condition of conditions) {
    const runs = await gather(condition, settings, store, scheduled, models);
    const summary = reportCondition(condition, runs, settings.seeds.length);
    summaries.push(summary);
    if (!condition.sweep || condition.oracles) {
      plots.push(await plotCondition(out, condition, runs, summary, settings.seeds.length));
    }
  }
  if (!settings.sweepOracles) {
    process.stdout.write(
      '\nThe oracles were not run on the lambda sweep (they take 8x to 36x a static run; --sweep-oracles runs them).\n',
    );
  }
  return { summaries, plots };
}

/** Entry point for `npm run bench -- aset-sim [options]` (see the module comment). */
async function main(args: string[] = []): Promise<void> {
  const settings = settingsFrom(args, repoRoot());
  const started = performance.now();
  const conditions = conditionsOf(settings);
  // Fail fast: a missing model must stop the bench before minutes of simulation, not after.
  const models = settings.staticOnly
    ? new Map<TopologyName, TrainedNetwork>()
    : await trainedModels(settings);
  const pool = new SimPool(settings.workers);
  const store = new RunStore();
  progress(
    `${conditions.length} conditions on seeds ${settings.seeds.join(', ')}, ${settings.workers} worker thread(s)${settings.staticOnly ? ' (ASET skipped: --static-only)' : ', ASET on the main thread'}${settings.quick ? '; --quick: durations / 4, numbers for smoke-testing only' : ''}`,
  );
  try {
    const scheduled = schedule(pool, conditions, settings, store);
    if (!settings.staticOnly) await runAset(conditions, settings, models, store);
    const { summaries, plots } = await report(conditions, settings, store, scheduled, models);
    const { figures, targets, notes } = headline(summaries, await speedOf(store, settings.seeds));
    const wallS = (performance.now() - started) / 1000;
    Object.assign(figures, {
      seeds: settings.seeds.length,
      first_seed: settings.seeds[0]!,
      wall_s: wallS,
    });
    process.stdout.write(
      `\n${notes.join('\n')}${notes.length > 0 ? '\n' : ''}plots: ${plots.map((p) => relative(process.cwd(), p)).join(', ')}\nwall time ${wallS.toFixed(0)} s${settings.quick ? ' (--quick: durations / 4)' : ''}\n`,
    );
    finish('aset-sim', figures, targets);
  } finally {
    await pool.close();
  }
}

export { main };
