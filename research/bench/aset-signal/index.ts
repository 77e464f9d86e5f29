/**
 * `npm run bench -- aset-signal [--topology T] [--condition C] [--base P,...] [--seeds N]
 * [--horizon N] [--workers N] [--skip-references | --references-only] [--save F] [--load F]`: how much of the hindsight oracle's margin a
 * controller that sees ASET's state could ever claim, in one regime (conditions.ts).
 *
 * First the references on the same seeds: every static policy and the 4-window-lookahead
 * oracle, so the margin there is to claim is known. Then, along the path of each base policy, at
 * the condition's decision windows, each of the seven policies is tried for that one window, the
 * base policy resuming after it; its gain is its success over the next `horizon` windows minus
 * the base policy's, in points of the queries counted. Seeds are training seeds (1..N), never
 * the aset-sim bench's. Leave-one-seed-out, four ways of choosing are scored on the held-out
 * decisions: the hindsight best (not causal), the one policy best on average (state-free), the
 * best policy per decision window (state-free but clock-aware), and ASET's Q-network
 * architecture regressing the gains from the state, a supervised best case for what the DQN
 * could learn from the same state. A positive control plants a 2-point state-dependent effect and
 * checks the network finds it.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { parseArgs } from 'node:util';
import { featureNames, featuresPerWorker } from '../../../shared/aset/observation.js';
import type { PolicyName } from '../../../shared/aset/types.js';
import { policyNames } from '../../../shared/aset/types.js';
import { topologyNames } from '../aset-sim/jobs.js';
import type { TopologyName } from '../aset-sim/jobs.js';
import { SimPool } from '../aset-sim/pool.js';
import { formatCi, meanCi } from '../aset-sim/stats.js';
import { finish, printTable } from '../../../bench/support/report.js';
import { collect, collectInThread } from './collect.js';
import type { CollectJob, SeedTrials } from './collect.js';
import { conditionNames, conditions } from './conditions.js';
import type { ConditionName } from './conditions.js';
import { argmax, crossValidate, medianSplitGain, mostVariedFeature, plantEffect } from './fit.js';
import type { Sample } from './fit.js';
import { lookaheadWindows, measureReferences } from './references.js';
import type { References } from './references.js';

/** The best static policy per topology at lambda = 60 in `npm run bench -- aset-sim`. */
const bestStatic: Record<TopologyName, PolicyName> = {
  'dc-cloud': 'farthest',
  'co-dc-cloud': 'cheaper',
  'full-edge': 'farthest',
};
const plantedPoints = 2;
/** Minimum gradient steps the planted control chooses among (0: 20 epochs, the 2026-11-23 fit). */
const fitLengths = [0, 500, 2000];

function oneOf<T extends string>(flag: string, value: string, allowed: readonly T[]): T {
  if (!allowed.includes(value as T))
    throw new RangeError(`${flag} must be one of ${allowed.join(', ')}`);
  return value as T;
}

function settingsFrom(args: string[]) {
  const { values } = parseArgs({
    args,
    options: {
      topology: { type: 'string', default: 'full-edge' },
      condition: { type: 'string', default: 'steady' },
      base: { type: 'string' },
      seeds: { type: 'string', default: '16' },
      horizon: { type: 'string', default: '5' },
      workers: { type: 'string', default: String(Math.min(2, availableParallelism())) },
      'skip-references': { type: 'boolean', default: false },
      'references-only': { type: 'boolean', default: false },
      save: { type: 'string' },
      load: { type: 'string' },
    },
  });
  const topology = oneOf('--topology', values.topology, topologyNames);
  const condition = oneOf<ConditionName>('--condition', values.condition, conditionNames);
  const bases = (values.base ?? bestStatic[topology])
    .split(',')
    .map((p) => oneOf('--base', p.trim(), policyNames));
  const seeds = Number(values.seeds);
  const horizon = Number(values.horizon);
  const workers = Number(values.workers);
  if (!Number.isInteger(seeds) || seeds < 2)
    throw new RangeError('--seeds must be an integer >= 2');
  if (!Number.isInteger(horizon) || horizon < 1 || horizon > 5) {
    throw new RangeError(
      '--horizon must be an integer in 1..5 (windows after the 19th run past 10 minutes)',
    );
  }
  if (!Number.isInteger(workers) || workers < 0)
    throw new RangeError('--workers must be an integer >= 0');
  return {
    topology,
    condition,
    bases,
    seeds,
    horizon,
    workers,
    references: !values['skip-references'],
    referencesOnly: values['references-only'],
    save: values.save,
    load: values.load,
  };
}
type Settings = ReturnType<typeof settingsFrom>;

/** The deviation trials as JSON (states as plain arrays), so the fits can be rerun alone. */
function writeTrials(path: string, runs: readonly SeedTrials[]): void {
  const plain = runs.map((run) => ({
    ...run,
    trials: run.trials.map((t) => ({ ...t, state: Array.from(t.state) })),
  }));
  writeFileSync(path, JSON.stringify(plain));
}

function readTrials(path: string): SeedTrials[] {
  const plain = JSON.parse(readFileSync(path, 'utf8')) as Array<
    Omit<SeedTrials, 'trials'> & {
      trials: Array<Omit<SeedTrials['trials'][number], 'state'> & { state: number[] }>;
    }
  >;
  return plain.map((run) => ({
    ...run,
    trials: run.trials.map((t) => ({ ...t, state: Float32Array.from(t.state) })),
  }));
}

/** "load of worker 7" for a state index (the state is worker-major, features of eq. 11). */
function featureLabel(index: number): string {
  return `${featureNames[index % featuresPerWorker]} of worker ${Math.floor(index / featuresPerWorker)}`;
}

/** Gains in points of the base policy's counted queries over the horizon. */
function samplesOf(runs: readonly SeedTrials[], base: PolicyName): Sample[] {
  return runs
    .filter((run) => run.base === base)
    .flatMap(({ seed, trials }) =>
      trials.map((trial) => {
        const baseSuccess = trial.success[base]!;
        const counted = trial.counted[base]!;
        return {
          group: seed,
          window: trial.window,
          state: trial.state,
          gains: policyNames.map((p) => (100 * (trial.success[p]! - baseSuccess)) / counted),
        };
      }),
    );
}

async function references(settings: Settings, seeds: readonly number[]): Promise<References> {
  const pool = new SimPool(settings.workers);
  try {
    return await measureReferences(pool, settings.topology, conditions[settings.condition], seeds);
  } finally {
    await pool.close();
  }
}

function printReferences(refs: References, settings: Settings): void {
  const seeds = refs.oracle.length;
  const best = refs.statics[refs.bestStatic];
  printTable(
    `references, ${settings.topology}, ${settings.condition} (success %, mean ± 95% CI over ${seeds} seeds; minus the best static policy paired by seed)`,
    ['who', 'success %', `minus ${refs.bestStatic}`],
    [
      ...policyNames.map((p) => [
        p,
        formatCi(meanCi(refs.statics[p])),
        formatCi(meanCi(refs.statics[p].map((v, i) => v - best[i]!))),
      ]),
      [
        'best static per seed (hindsight)',
        formatCi(meanCi(refs.perSeedBest)),
        formatCi(meanCi(refs.perSeedBest.map((v, i) => v - best[i]!))),
      ],
      [
        `oracle, ${lookaheadWindows}-window lookahead`,
        formatCi(meanCi(refs.oracle)),
        formatCi(refs.oracleGap),
      ],
    ],
  );
}

async function deviations(settings: Settings, seeds: readonly number[]): Promise<SeedTrials[]> {
  const condition = conditions[settings.condition];
  const threads = Math.max(1, settings.workers);
  const jobs: CollectJob[] = Array.from({ length: threads }, (_, t) => ({
    topology: settings.topology,
    seeds: seeds.filter((_, i) => i % threads === t),
    load: condition.load,
    bases: settings.bases,
    decisions: condition.decisions,
    horizonWindows: settings.horizon,
  })).filter((job) => job.seeds.length > 0);
  const runs = await Promise.all(
    jobs.map((job) => (settings.workers === 0 ? collect(job) : collectInThread(job))),
  );
  return runs.flat();
}

/** The tables of one base policy; its figures for the final JSON line. */
function analyseBase(runs: readonly SeedTrials[], base: PolicyName, settings: Settings) {
  const samples = samplesOf(runs, base);
  printTable(
    `one-window deviations from ${base}: gain over the next ${settings.horizon} windows, points (mean ± 95% CI over ${samples.length} decisions)`,
    ['policy', 'gain', 'best in hindsight %'],
    policyNames.map((p, a) => [
      p,
      formatCi(meanCi(samples.map((s) => s.gains[a]!))),
      (100 * samples.filter((s) => argmax(s.gains) === a).length) / samples.length,
    ]),
  );
  const feature = mostVariedFeature(samples);
  const planted = plantEffect(samples, policyNames.indexOf(base), feature, plantedPoints);
  // The fit's length is chosen on the planted control alone (its power to find a planted
  // effect), never on the real gains, then applied to them.
  const tried = fitLengths.map((minSteps) => ({
    minSteps,
    control: crossValidate(planted, { minSteps }),
  }));
  const { minSteps, control } = tried.reduce((a, b) =>
    b.control.network - b.control.stateFree > a.control.network - a.control.stateFree ? b : a,
  );
  process.stdout.write(
    `\nfit length by the planted control: ${tried.map((t) => `${t.minSteps} steps ${(t.control.network - t.control.stateFree).toFixed(3)}`).join(', ')}; chosen ${minSteps}\n`,
  );
  const real = crossValidate(samples, { minSteps });
  printTable(
    `choosing the deviation from ${base}, leave-one-seed-out: mean realized gain, points`,
    [
      'who chooses',
      'real gains',
      `planted control (+-${plantedPoints} on ${base} by ${featureLabel(feature)})`,
    ],
    [
      ['hindsight best (not causal)', real.hindsight, control.hindsight],
      ['one policy for every state', real.stateFree, control.stateFree],
      ['one policy per decision window (clock)', real.perWindow, control.perWindow],
      ['Q-network on the state', real.network, control.network],
      [
        'median split on that feature (in-sample)',
        medianSplitGain(samples, feature),
        medianSplitGain(planted, feature),
      ],
      [
        'state-based minus the better state-free',
        real.network - Math.max(real.stateFree, real.perWindow),
        control.network - Math.max(control.stateFree, control.perWindow),
      ],
    ],
  );
  return {
    [`${base}_decisions`]: samples.length,
    [`${base}_hindsightGain`]: real.hindsight,
    [`${base}_stateFreeGain`]: real.stateFree,
    [`${base}_perWindowGain`]: real.perWindow,
    [`${base}_networkGain`]: real.network,
    [`${base}_stateSignal`]: real.network - Math.max(real.stateFree, real.perWindow),
    [`${base}_plantedSignal`]: control.network - control.stateFree,
    [`${base}_fitMinSteps`]: minSteps,
  };
}

async function main(args: string[]): Promise<void> {
  const settings = settingsFrom(args);
  const condition = conditions[settings.condition];
  const seeds = Array.from({ length: settings.seeds }, (_, i) => 1 + i);
  process.stdout.write(
    `aset-signal: ${settings.topology}, ${settings.condition} (${condition.note}); bases ${settings.bases.join(', ')}; decisions at windows ${condition.decisions.join(', ')} x ${policyNames.length} policies on seeds 1..${settings.seeds}, gains over ${settings.horizon} windows of 25 s\n`,
  );
  const started = performance.now();
  let figures: Record<string, number> = {};
  if (settings.references) {
    const refs = await references(settings, seeds);
    printReferences(refs, settings);
    figures = {
      oracleGap: refs.oracleGap.mean,
      oracleGapCiLow: refs.oracleGap.mean - refs.oracleGap.halfWidth,
      bestStaticSuccess: meanCi(refs.statics[refs.bestStatic]).mean,
    };
  }
  const referencesS = (performance.now() - started) / 1000;
  if (settings.referencesOnly) {
    finish('aset-signal', { seeds: settings.seeds, ...figures, wallS: referencesS }, {});
    return;
  }
  const runs =
    settings.load === undefined ? await deviations(settings, seeds) : readTrials(settings.load);
  if (settings.save !== undefined) writeTrials(settings.save, runs);
  const collectedS = (performance.now() - started) / 1000;
  for (const base of settings.bases) figures = { ...figures, ...analyseBase(runs, base, settings) };
  const wallS = (performance.now() - started) / 1000;
  process.stdout.write(
    `\nreferences ${referencesS.toFixed(0)} s, deviations ${(collectedS - referencesS).toFixed(0)} s, fits ${(wallS - collectedS).toFixed(0)} s\n`,
  );
  const first = settings.bases[0]!;
  finish(
    'aset-signal',
    { seeds: settings.seeds, horizonWindows: settings.horizon, ...figures, wallS },
    {
      // The method's power: a state-dependent effect that exists must show up.
      [`${first}_plantedSignal`]: {
        value: figures[`${first}_plantedSignal`]!,
        op: '>=',
        target: 0.25,
      },
    },
  );
}

export { main };
