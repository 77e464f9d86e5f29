/**
 * `npm run bench -- aset-signal [--topology T] [--seeds N] [--workers N]`: how much of the
 * hindsight oracle's margin a controller that sees ASET's state could ever claim.
 *
 * Along the path of the topology's best static policy (the aset-sim bench's winner at lambda =
 * 60), at every other window from the warm-up's end, each of the seven policies is tried for that
 * one window, the base policy resuming after it; its gain is its success over the next
 * `horizon` windows minus the base policy's, in points of the queries counted. Seeds are training
 * seeds (1..N), never the aset-sim bench's. Then, leave-one-seed-out, three ways of choosing are
 * scored on the held-out decisions: the hindsight best (not causal), the one policy best on
 * average (state-free), and ASET's Q-network architecture regressing the gains from the state, a
 * supervised best case for what the DQN could learn from the same state. A positive control
 * plants a 2-point state-dependent effect and checks the network finds it.
 */
import { availableParallelism } from 'node:os';
import { parseArgs } from 'node:util';
import { featureNames, featuresPerWorker } from '../../shared/aset/observation.js';
import type { PolicyName } from '../../shared/aset/types.js';
import { policyNames } from '../../shared/aset/types.js';
import { topologyNames } from '../aset-sim/jobs.js';
import type { TopologyName } from '../aset-sim/jobs.js';
import { formatCi, meanCi } from '../aset-sim/stats.js';
import { finish, printTable } from '../support/report.js';
import { collect, collectInThread } from './collect.js';
import type { CollectJob, SeedTrials } from './collect.js';
import { argmax, crossValidate, medianSplitGain, mostVariedFeature, plantEffect } from './fit.js';
import type { Sample } from './fit.js';

/** The best static policy per topology at lambda = 60 in `npm run bench -- aset-sim`. */
const bestStatic: Record<TopologyName, PolicyName> = {
  'dc-cloud': 'farthest',
  'co-dc-cloud': 'cheaper',
  'full-edge': 'farthest',
};
/** Windows 5, 7, ..., 19 of 25 s: from the 2-minute warm-up's end, the horizon inside 10 minutes. */
const decisions = [5, 7, 9, 11, 13, 15, 17, 19];
const plantedPoints = 2;

function settingsFrom(args: string[]) {
  const { values } = parseArgs({
    args,
    options: {
      topology: { type: 'string', default: 'full-edge' },
      seeds: { type: 'string', default: '16' },
      horizon: { type: 'string', default: '5' },
      workers: { type: 'string', default: String(Math.min(2, availableParallelism())) },
    },
  });
  const topology = values.topology as TopologyName;
  if (!topologyNames.includes(topology)) {
    throw new RangeError(`--topology must be one of ${topologyNames.join(', ')}`);
  }
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
  return { topology, seeds, horizon, workers };
}

/** "load of worker 7" for a state index (the state is worker-major, features of eq. 11). */
function featureLabel(index: number): string {
  return `${featureNames[index % featuresPerWorker]} of worker ${Math.floor(index / featuresPerWorker)}`;
}

/** Gains in points of the base policy's counted queries over the horizon. */
function samplesOf(runs: readonly SeedTrials[], base: PolicyName): Sample[] {
  return runs.flatMap(({ seed, trials }) =>
    trials.map((trial) => {
      const baseSuccess = trial.success[base]!;
      const counted = trial.counted[base]!;
      return {
        group: seed,
        state: trial.state,
        gains: policyNames.map((p) => (100 * (trial.success[p]! - baseSuccess)) / counted),
      };
    }),
  );
}

async function main(args: string[]): Promise<void> {
  const settings = settingsFrom(args);
  const base = bestStatic[settings.topology];
  const seeds = Array.from({ length: settings.seeds }, (_, i) => 1 + i);
  const threads = Math.max(1, settings.workers);
  const jobs: CollectJob[] = Array.from({ length: threads }, (_, t) => ({
    topology: settings.topology,
    seeds: seeds.filter((_, i) => i % threads === t),
    lambda: 60,
    base,
    decisions,
    horizonWindows: settings.horizon,
  })).filter((job) => job.seeds.length > 0);
  process.stdout.write(
    `aset-signal: ${settings.topology}, lambda = 60, base ${base}; ${decisions.length} decisions x ${policyNames.length} policies on seeds 1..${settings.seeds}, gains over ${settings.horizon} windows of 25 s; ${jobs.length} thread(s)\n`,
  );
  const started = performance.now();
  const runs = (
    await Promise.all(
      jobs.map((job) => (settings.workers === 0 ? collect(job) : collectInThread(job))),
    )
  ).flat();
  const collectedS = (performance.now() - started) / 1000;
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

  const real = crossValidate(samples);
  const feature = mostVariedFeature(samples);
  const target = policyNames.indexOf(base);
  const planted = plantEffect(samples, target, feature, plantedPoints);
  const control = crossValidate(planted);
  printTable(
    'choosing the deviation, leave-one-seed-out: mean realized gain, points',
    [
      'who chooses',
      'real gains',
      `planted control (+-${plantedPoints} on ${base} by ${featureLabel(feature)})`,
    ],
    [
      ['hindsight best (not causal)', real.hindsight, control.hindsight],
      ['one policy for every state', real.stateFree, control.stateFree],
      ['Q-network on the state', real.network, control.network],
      [
        'median split on that feature (in-sample)',
        medianSplitGain(samples, feature),
        medianSplitGain(planted, feature),
      ],
      [
        'state-based minus state-free',
        real.network - real.stateFree,
        control.network - control.stateFree,
      ],
    ],
  );
  const wallS = (performance.now() - started) / 1000;
  process.stdout.write(
    `\nsimulations ${collectedS.toFixed(0)} s, fits ${(wallS - collectedS).toFixed(0)} s\n`,
  );
  finish(
    'aset-signal',
    {
      decisions: samples.length,
      seeds: settings.seeds,
      horizonWindows: settings.horizon,
      hindsightGain: real.hindsight,
      stateFreeGain: real.stateFree,
      networkGain: real.network,
      stateSignal: real.network - real.stateFree,
      plantedStateFree: control.stateFree,
      plantedNetwork: control.network,
      plantedSignal: control.network - control.stateFree,
      wallS,
    },
    {
      // The method's power: a state-dependent effect that exists must show up.
      plantedSignal: { value: control.network - control.stateFree, op: '>=', target: 0.25 },
    },
  );
}

export { main };
