/**
 * bench/aset-sim: the ASET paper's simulated evaluation (section V, figures 4-7) on our three
 * topologies. Every run goes through `runControlled` (shared/aset/sim/episode.ts), the loop the
 * training and the function use, with T = 25 s.
 *
 * 1. lambda = 60 on dc-cloud, co-dc-cloud and full-edge: success / QoS-failure / rejection % of
 *    the seven static policies, ASET, and two hindsight references (the greedy per-window oracle
 *    and the best static policy per seed-run), mean and 95% Student-t interval over the seeds.
 *    Runs last 10 simulated minutes; the first 2 are warm-up, run but not counted.
 * 2. lambda sweep 20..100 on full-edge (figure 5b/5d style), success %.
 * 3. The two dynamic patterns on full-edge (figure 7), counted from 0 since the change of load is
 *    the point, with per-window time series.
 * 4. Per-window time series at lambda = 60, one plot per topology (figures 4a/4c/5a style).
 * 5. Simulation speed: simulated / wall seconds of the full-edge static runs at lambda = 60.
 * 6. Headroom without the state: at lambda = 60 per topology, the best static policy alternated
 *    window by window with each other policy. A meta-policy that beats the best static policy
 *    must either mix policies or react to the state; these rows measure the first.
 *
 * Seeds 101..(100 + n): `npm run aset:train` trains on seeds 1..P (P = 50 by default), and the
 * bench refuses a model whose recorded training seeds reach 101. A missing model stops the bench
 * with the command that trains it; `--static-only` skips the ASET rows and targets instead.
 *
 * Options: --static-only, --seeds N (default 5), --minutes M (default 10), --workers N (threads
 * for the static and oracle runs; default min(2, cores); 0 runs everything in this thread),
 * --oracle-lookahead N (score the oracle's trials over N more windows; default 0, greedy),
 * --models DIR (where aset-<topology>.onnx are; default models/).
 */
import { availableParallelism } from 'node:os';
import { relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { runControlled } from '../../shared/aset/sim/episode.js';
import type { WindowController } from '../../shared/aset/window.js';
import { bestStaticInHindsight } from '../../shared/aset/sim/oracle.js';
import type { Outcomes } from '../../shared/aset/window.js';
import { readTrainedNetwork } from '../../shared/aset/network-card.js';
import { policyNames } from '../../shared/aset/types.js';
import type { PolicyName, Topology } from '../../shared/aset/types.js';
import { writeLinePlot } from '../support/plot.js';
import type { PlotSeries } from '../support/plot.js';
import { finish, median, printTable } from '../support/report.js';
import type { Target } from '../support/report.js';
import { optionsFor, repoRoot, scenarioFor, topologyNames } from './jobs.js';
import type { JobResult, Load, Runner, SimJob, TopologyName } from './jobs.js';
import { SimPool } from './pool.js';
import { formatCi, meanCi } from './stats.js';

const firstSeed = 101;
const warmupMs = 120_000;
const sweepLambdas = [20, 40, 60, 80, 100] as const;
const patterns = ['burst', 'falling'] as const;
const patternLabel: Record<(typeof patterns)[number], string> = {
  burst: 'burst: 20 -> 60 -> 100 clients/min every 150 s',
  falling: 'falling: 60 -> 40 -> 20, back to 60 in steps of 10, every 150 s',
};
const asetLabel = 'ASET';
const oracleLabel = 'oracle (greedy per window, hindsight)';
const hindsightLabel = 'best static per seed (hindsight)';

/** What the bench needs of aset-controller.ts, so a change there fails to compile here. */
interface AsetControllerModule {
  createAsetController(options: {
    model: Uint8Array;
    topology: Topology;
  }): Promise<WindowController & { close(): Promise<void> }>;
  createDeployedController(options: {
    network: TrainedNetwork;
    topology: Topology;
  }): Promise<WindowController & { close(): Promise<void> }>;
}

type TrainedNetwork = ReturnType<typeof readTrainedNetwork>;
/** The deployed meta-policy, and the network itself when a static policy was deployed instead. */
type AsetRunner = 'aset' | 'aset-network';

interface Settings {
  readonly staticOnly: boolean;
  readonly seeds: readonly number[];
  readonly durationMs: number;
  readonly workers: number;
  /** Extra windows the oracle scores each candidate over (0: the greedy definition). */
  readonly oracleLookahead: number;
  /** Where aset-<topology>.onnx are read from (default models/ of the checkout). */
  readonly models: URL;
}

function settingsFrom(args: string[], root: URL): Settings {
  const { values } = parseArgs({
    args,
    options: {
      'static-only': { type: 'boolean', default: false },
      seeds: { type: 'string', default: '5' },
      minutes: { type: 'string', default: '10' },
      workers: { type: 'string', default: String(Math.min(2, availableParallelism())) },
      'oracle-lookahead': { type: 'string', default: '0' },
      models: { type: 'string' },
    },
  });
  const seeds = Number(values.seeds);
  const minutes = Number(values.minutes);
  const workers = Number(values.workers);
  const oracleLookahead = Number(values['oracle-lookahead']);
  if (!Number.isInteger(seeds) || seeds < 1)
    throw new RangeError('--seeds must be an integer >= 1');
  if (!(minutes * 60_000 > warmupMs)) {
    throw new RangeError(`--minutes must exceed the ${warmupMs / 60_000}-minute warm-up`);
  }
  if (!Number.isInteger(workers) || workers < 0) {
    throw new RangeError('--workers must be an integer >= 0');
  }
  if (!Number.isInteger(oracleLookahead) || oracleLookahead < 0) {
    throw new RangeError('--oracle-lookahead must be an integer >= 0');
  }
  return {
    staticOnly: values['static-only'],
    oracleLookahead,
    models:
      values.models === undefined
        ? new URL('models/', root)
        : pathToFileURL(`${resolve(values.models)}/`),
    seeds: Array.from({ length: seeds }, (_, i) => firstSeed + i),
    durationMs: Math.round(minutes * 60_000),
    workers,
  };
}

/**
 * Stops before any work when a model is missing, was trained on other data than data/aset/ holds
 * now (readTrainedNetwork), or was trained or selected on an evaluation seed.
 */
async function trainedModel(
  models: URL,
  topology: TopologyName,
  seeds: readonly number[],
): Promise<TrainedNetwork> {
  const network = readTrainedNetwork(models, await scenarioFor(topology));
  const { card } = network;
  const cardName = relative(process.cwd(), fileURLToPath(new URL(`aset-${topology}.json`, models)));
  const { trainingSeeds, validation } = card.settings;
  if (trainingSeeds >= Math.min(...seeds)) {
    throw new Error(
      `${cardName}: trained on seeds 1..${trainingSeeds}, which overlap the evaluation seeds from ${Math.min(...seeds)}`,
    );
  }
  if (validation !== undefined && validation.seeds.some((s) => seeds.includes(s))) {
    throw new Error(
      `${cardName}: selected on validation seeds ${validation.seeds.join(', ')}, which overlap the evaluation seeds`,
    );
  }
  return network;
}

type CycleRunner = Extract<Runner, { kind: 'cycle' }>;

const loadKey = (load: Load) =>
  load.kind === 'constant'
    ? `lambda-${load.lambda}`
    : load.kind === 'random'
      ? 'random'
      : load.name;
const runnerKey = (runner: Runner | AsetRunner) => {
  if (runner === 'aset' || runner === 'aset-network') return runner;
  if (runner.kind === 'static') return runner.policy;
  return runner.kind === 'oracle' ? 'oracle' : `cycle:${runner.policies.join('+')}`;
};
const jobKey = (topology: TopologyName, load: Load, runner: Runner | AsetRunner, seed: number) =>
  `${topology}|${loadKey(load)}|${runnerKey(runner)}|${seed}`;

const total = (o: Outcomes) => o.success + o.qosFailure + o.rejected;
const percent = (o: Outcomes, field: keyof Outcomes) =>
  total(o) > 0 ? (100 * o[field]) / total(o) : NaN;
const snake = (name: string) => name.replaceAll('-', '_');
const countedOf = (runs: ReadonlyArray<{ counted: Outcomes }>) => runs.map((r) => r.counted);

/** Per-window success %, averaged over the seeds (windows with no resolved query skipped). */
function successSeries(name: string, runs: readonly JobResult[]): PlotSeries {
  const first = runs[0]!.windows;
  return {
    name,
    points: first.map((window, k) => {
      const values = runs
        .map((run) => percent(run.windows[k]!, 'success'))
        .filter((v) => !Number.isNaN(v));
      return {
        x: window.endMs / 1000,
        y: values.length > 0 ? values.reduce((a, b) => a + b, 0) / values.length : NaN,
      };
    }),
  };
}

function progress(message: string): void {
  process.stderr.write(`aset-sim: ${message}\n`);
}

/**
 * Runs the ASET controller of each topology on the main thread, with the pool's seeds and loads;
 * `models` are the networks `trainedModel` checked at start-up.
 */
async function runAset(
  plan: ReadonlyArray<{ topology: TopologyName; load: Load; warmupMs: number }>,
  settings: Settings,
  models: ReadonlyMap<TopologyName, TrainedNetwork>,
  results: Map<string, Promise<JobResult>>,
): Promise<void> {
  const asetModule: AsetControllerModule = await import('../../shared/aset/aset-controller.js');
  const play = async (
    topology: TopologyName,
    controller: WindowController & { close(): Promise<void> },
    runner: AsetRunner,
    loads: typeof plan,
  ) => {
    try {
      for (const { load, warmupMs: warmup } of loads) {
        for (const seed of settings.seeds) {
          const options = await optionsFor({ topology, seed, load });
          const started = performance.now();
          const run = await runControlled(options, controller, {
            durationMs: settings.durationMs,
            warmupMs: warmup,
          });
          results.set(
            jobKey(topology, load, runner, seed),
            Promise.resolve({
              ...run,
              wallMs: performance.now() - started,
              simulatedMs: settings.durationMs,
            }),
          );
        }
      }
    } finally {
      await controller.close();
    }
  };
  for (const topology of topologyNames) {
    const mine = plan.filter((p) => p.topology === topology);
    if (mine.length === 0) continue;
    const network = models.get(topology)!;
    const { topology: built } = await scenarioFor(topology);
    await play(
      topology,
      await asetModule.createDeployedController({ network, topology: built }),
      'aset',
      mine,
    );
    // A static policy was deployed: the network still plays lambda = 60, to show what it lost.
    if (network.card.deployed.kind === 'static') {
      await play(
        topology,
        await asetModule.createAsetController({ model: network.model, topology: built }),
        'aset-network',
        mine.filter((p) => p.load.kind === 'constant' && p.load.lambda === 60),
      );
    }
    progress(`ASET on ${topology}: ${mine.length * settings.seeds.length} runs done`);
  }
}

function shareLine(label: string, runs: readonly JobResult[]): string {
  const shares = policyNames
    .map((p) => ({ p, share: runs.reduce((a, r) => a + r.policyShare[p], 0) / runs.length }))
    .filter(({ share }) => share > 0)
    .sort((a, b) => b.share - a.share)
    .map(({ p, share }) => `${p} ${(100 * share).toFixed(0)}%`);
  return `${label} chose: ${shares.join(', ')}`;
}

/** Entry point for `npm run bench -- aset-sim [options]` (see the module comment). */
async function main(args: string[] = []): Promise<void> {
  const root = repoRoot();
  const settings = settingsFrom(args, root);
  const started = performance.now();
  const withAset = !settings.staticOnly;
  // Fail fast: a missing model must stop the bench before minutes of simulation, not after.
  const models = new Map<TopologyName, TrainedNetwork>();
  if (withAset)
    for (const topology of topologyNames)
      models.set(topology, await trainedModel(settings.models, topology, settings.seeds));

  const lambda60: Load = { kind: 'constant', lambda: 60 };
  const oracleRunner: Runner = { kind: 'oracle', lookaheadWindows: settings.oracleLookahead };
  const base = { durationMs: settings.durationMs, warmupMs };
  const jobs: SimJob[] = [];
  // Longest first, so neither thread is left with a long oracle run at the end.
  for (const topology of [...topologyNames].reverse()) {
    for (const seed of settings.seeds) {
      jobs.push({
        ...base,
        topology,
        seed,
        load: lambda60,
        runner: oracleRunner,
      });
    }
  }
  const statics = (topology: TopologyName, load: Load, warmup: number) => {
    for (const seed of settings.seeds) {
      for (const policy of policyNames) {
        jobs.push({
          topology,
          seed,
          load,
          durationMs: settings.durationMs,
          warmupMs: warmup,
          runner: { kind: 'static', policy },
        });
      }
    }
  };
  for (const topology of topologyNames) statics(topology, lambda60, warmupMs);
  for (const lambda of sweepLambdas) {
    if (lambda !== 60) statics('full-edge', { kind: 'constant', lambda }, warmupMs);
  }
  for (const name of patterns) statics('full-edge', { kind: 'pattern', name }, 0);

  const asetPlan = [
    ...topologyNames.map((topology) => ({ topology, load: lambda60, warmupMs })),
    ...sweepLambdas
      .filter((lambda) => lambda !== 60)
      .map((lambda) => ({
        topology: 'full-edge' as const,
        load: { kind: 'constant', lambda } as const,
        warmupMs,
      })),
    ...patterns.map((name) => ({
      topology: 'full-edge' as const,
      load: { kind: 'pattern', name } as const,
      warmupMs: 0,
    })),
  ];
  progress(
    `${jobs.length} static/oracle runs on ${settings.workers} worker thread(s)${withAset ? ` and ${asetPlan.length * settings.seeds.length} ASET runs on the main thread` : ' (ASET skipped: --static-only)'}; seeds ${settings.seeds.join(', ')}; ${settings.durationMs / 1000} simulated s each`,
  );

  const pool = new SimPool(settings.workers);
  const results = new Map<string, Promise<JobResult>>();
  let done = 0;
  let reported = 0;
  const submit = (job: SimJob, counted: boolean) => {
    const promise = pool.run(job).then((result) => {
      if (!counted) return result;
      done += 1;
      if (done * 10 >= (reported + 1) * jobs.length) {
        reported = Math.floor((done * 10) / jobs.length);
        progress(
          `${done}/${jobs.length} runs done (${((performance.now() - started) / 1000).toFixed(0)} s)`,
        );
      }
      return result;
    });
    // Keeps an early failure from surfacing as an unhandled rejection before it is awaited.
    promise.catch(() => undefined);
    results.set(jobKey(job.topology, job.load, job.runner, job.seed), promise);
  };
  for (const job of jobs) submit(job, true);
  // Section 6's cycles, queued per topology once its best static policy is known.
  const cycles: { topology: TopologyName; best: PolicyName; runners: CycleRunner[] }[] = [];
  const aset = withAset ? runAset(asetPlan, settings, models, results) : Promise.resolve();
  aset.catch(() => undefined);

  const runsOf = async (topology: TopologyName, load: Load, runner: Runner | AsetRunner) =>
    Promise.all(
      settings.seeds.map((seed) => {
        const result = results.get(jobKey(topology, load, runner, seed));
        if (result === undefined) throw new Error(`no run for ${topology} ${loadKey(load)}`);
        return result;
      }),
    );
  const staticRunner = (policy: PolicyName): Runner => ({ kind: 'static', policy });
  const figures: Record<string, number> = {};
  const targets: Record<string, Target> = {};
  const out = new URL('out/', root);
  const plots: string[] = [];

  try {
    await aset;
    // 1 and 4: lambda = 60 per topology.
    for (const topology of topologyNames) {
      const perPolicy = new Map<PolicyName, JobResult[]>();
      for (const policy of policyNames) {
        perPolicy.set(policy, await runsOf(topology, lambda60, staticRunner(policy)));
      }
      const oracle = await runsOf(topology, lambda60, oracleRunner);
      const asetRuns = withAset ? await runsOf(topology, lambda60, 'aset') : undefined;
      const deployed = models.get(topology)?.card.deployed;
      const networkRuns =
        deployed?.kind === 'static' ? await runsOf(topology, lambda60, 'aset-network') : undefined;
      const hindsight = settings.seeds.map((_, i) =>
        bestStaticInHindsight(
          Object.fromEntries(policyNames.map((p) => [p, perPolicy.get(p)![i]!])) as Record<
            PolicyName,
            JobResult
          >,
        ),
      );
      const staticMeans = policyNames.map((policy) => ({
        policy,
        success: meanCi(perPolicy.get(policy)!.map((r) => percent(r.counted, 'success'))).mean,
      }));
      const best = staticMeans.reduce((a, b) => (b.success > a.success ? b : a));
      const cycleRunners: CycleRunner[] = policyNames
        .filter((p) => p !== best.policy)
        .map((p) => ({ kind: 'cycle', policies: [best.policy, p] }));
      cycles.push({ topology, best: best.policy, runners: cycleRunners });
      for (const runner of cycleRunners) {
        for (const seed of settings.seeds)
          submit({ ...base, topology, seed, load: lambda60, runner }, false);
      }
      const bestPerSeed = perPolicy.get(best.policy)!.map((r) => percent(r.counted, 'success'));
      // The seeds differ far more from each other than the policies do on one seed, so the gap
      // to the best static policy is also given paired (same seed, same workload): its interval
      // is the one that says whether a difference is real.
      const row = (label: string, counted: readonly Outcomes[]) => [
        label,
        formatCi(meanCi(counted.map((o) => percent(o, 'success')))),
        formatCi(meanCi(counted.map((o) => percent(o, 'qosFailure')))),
        formatCi(meanCi(counted.map((o) => percent(o, 'rejected')))),
        formatCi(meanCi(counted.map((o, i) => percent(o, 'success') - bestPerSeed[i]!))),
      ];
      const rows = [
        ...policyNames.map((p) => row(p, countedOf(perPolicy.get(p)!))),
        ...(asetRuns === undefined
          ? []
          : [
              row(
                deployed?.kind === 'static'
                  ? `${asetLabel} (deployed: ${deployed.policy}, which beat the network on validation)`
                  : asetLabel,
                countedOf(asetRuns),
              ),
            ]),
        ...(networkRuns === undefined
          ? []
          : [row(`${asetLabel} network (not deployed)`, countedOf(networkRuns))]),
        row(
          settings.oracleLookahead === 0
            ? oracleLabel
            : `${oracleLabel}, +${settings.oracleLookahead} windows lookahead`,
          countedOf(oracle),
        ),
        row(hindsightLabel, countedOf(hindsight)),
      ];
      printTable(
        `${topology}, lambda = 60: % of counted queries (windows from ${warmupMs / 1000} s to ${settings.durationMs / 1000} s), mean ± 95% CI over ${settings.seeds.length} seeds`,
        ['policy', 'success %', 'QoS failure %', 'rejected %', `success - ${best.policy} (paired)`],
        rows,
      );
      const oracleSuccess = meanCi(oracle.map((r) => percent(r.counted, 'success'))).mean;
      const hindsightSuccess = meanCi(hindsight.map((h) => percent(h.counted, 'success'))).mean;
      process.stdout.write(
        `best static: ${best.policy} (${best.success.toFixed(2)} %); per seed: ${hindsight.map((h) => h.policy).join(', ')}\n`,
      );
      process.stdout.write(`${shareLine('oracle', oracle)}\n`);
      const key = snake(topology);
      figures[`${key}_best_static_success`] = best.success;
      figures[`${key}_best_static_index`] = policyNames.indexOf(best.policy);
      figures[`${key}_hindsight_static_success`] = hindsightSuccess;
      figures[`${key}_oracle_success`] = oracleSuccess;
      figures[`${key}_oracle_minus_best_static`] = oracleSuccess - best.success;
      const series: PlotSeries[] = policyNames.map((p) => successSeries(p, perPolicy.get(p)!));
      if (asetRuns !== undefined) {
        process.stdout.write(`${shareLine('ASET', asetRuns)}\n`);
        const asetSuccess = meanCi(asetRuns.map((r) => percent(r.counted, 'success'))).mean;
        figures[`${key}_aset_success`] = asetSuccess;
        figures[`${key}_aset_minus_best_static`] = asetSuccess - best.success;
        figures[`${key}_aset_minus_oracle`] = asetSuccess - oracleSuccess;
        // -1: the network is deployed; otherwise the index of the static policy deployed.
        figures[`${key}_aset_deployed_static_index`] =
          deployed?.kind === 'static' ? policyNames.indexOf(deployed.policy) : -1;
        if (networkRuns !== undefined) {
          process.stdout.write(`${shareLine('ASET network (not deployed)', networkRuns)}\n`);
          figures[`${key}_aset_network_minus_best_static`] =
            meanCi(networkRuns.map((r) => percent(r.counted, 'success'))).mean - best.success;
        }
        series.push(successSeries(asetLabel, asetRuns));
      }
      series.push(successSeries('oracle (greedy)', oracle));
      const file = new URL(`aset-sim-timeseries-${topology}.svg`, out);
      await writeLinePlot(file, {
        title: `${topology}, lambda = 60: success per window of 25 s, mean of ${settings.seeds.length} seeds (first ${warmupMs / 1000} s warm-up, not counted)`,
        xTitle: 'time (s)',
        yTitle: 'success %',
        series,
      });
      plots.push(fileURLToPath(file));
      progress(
        `lambda 60 on ${topology} reported (${((performance.now() - started) / 1000).toFixed(0)} s)`,
      );
    }
    if (withAset) {
      targets.full_edge_aset_minus_best_static = {
        value: figures.full_edge_aset_minus_best_static!,
        op: '>=',
        target: 2,
      };
      targets.co_dc_cloud_aset_minus_best_static = {
        value: figures.co_dc_cloud_aset_minus_best_static!,
        op: '>=',
        target: 0,
      };
      targets.dc_cloud_aset_minus_best_static = {
        value: figures.dc_cloud_aset_minus_best_static!,
        op: '>=',
        target: -1,
      };
    }

    // 2: the lambda sweep on full-edge.
    const sweepRunners: { label: string; runner: Runner | 'aset' }[] = [
      ...policyNames.map((p) => ({ label: p, runner: staticRunner(p) })),
      ...(withAset ? [{ label: asetLabel, runner: 'aset' as const }] : []),
    ];
    const sweep = new Map<string, number[]>();
    for (const { label, runner } of sweepRunners) {
      const values: number[] = [];
      for (const lambda of sweepLambdas) {
        const runs = await runsOf('full-edge', { kind: 'constant', lambda }, runner);
        values.push(meanCi(runs.map((r) => percent(r.counted, 'success'))).mean);
      }
      sweep.set(label, values);
    }
    printTable(
      `full-edge, lambda sweep: success % (counted from ${warmupMs / 1000} s), mean over ${settings.seeds.length} seeds`,
      ['policy', ...sweepLambdas.map((l) => `lambda ${l}`)],
      [...sweep].map(([label, values]) => [label, ...values.map((v) => v.toFixed(2))]),
    );
    for (const [i, lambda] of sweepLambdas.entries()) {
      const bestStatic = Math.max(...policyNames.map((p) => sweep.get(p)![i]!));
      figures[`full_edge_lambda_${lambda}_best_static_success`] = bestStatic;
      if (withAset) figures[`full_edge_lambda_${lambda}_aset_success`] = sweep.get(asetLabel)![i]!;
    }
    const sweepFile = new URL('aset-sim-lambda-full-edge.svg', out);
    await writeLinePlot(sweepFile, {
      title: `full-edge: success % against clients per minute, mean of ${settings.seeds.length} seeds`,
      xTitle: 'lambda (clients / min per access point)',
      yTitle: 'success %',
      series: [...sweep].map(([name, values]) => ({
        name,
        points: values.map((y, i) => ({ x: sweepLambdas[i]!, y })),
      })),
    });
    plots.push(fileURLToPath(sweepFile));
    progress(`lambda sweep reported (${((performance.now() - started) / 1000).toFixed(0)} s)`);

    // 3: the dynamic patterns on full-edge.
    const patternRows: (string | number)[][] = [];
    const patternSuccess = new Map<string, number[]>();
    for (const name of patterns) {
      const load: Load = { kind: 'pattern', name };
      const series: PlotSeries[] = [];
      for (const { label, runner } of sweepRunners) {
        const runs = await runsOf('full-edge', load, runner);
        const values = patternSuccess.get(label) ?? [];
        values.push(meanCi(runs.map((r) => percent(r.counted, 'success'))).mean);
        patternSuccess.set(label, values);
        series.push(successSeries(label, runs));
      }
      const file = new URL(`aset-sim-pattern-${name}.svg`, out);
      await writeLinePlot(file, {
        title: `full-edge, ${patternLabel[name]}: success per window of 25 s, mean of ${settings.seeds.length} seeds`,
        xTitle: 'time (s)',
        yTitle: 'success %',
        series,
      });
      plots.push(fileURLToPath(file));
    }
    for (const [label, values] of patternSuccess) {
      patternRows.push([label, ...values.map((v) => v.toFixed(2))]);
    }
    printTable(
      `full-edge, dynamic patterns: success % over the whole ${settings.durationMs / 1000} s, mean over ${settings.seeds.length} seeds`,
      ['policy', ...patterns.map((p) => patternLabel[p])],
      patternRows,
    );
    for (const [i, name] of patterns.entries()) {
      figures[`full_edge_${name}_best_static_success`] = Math.max(
        ...policyNames.map((p) => patternSuccess.get(p)![i]!),
      );
      if (withAset) figures[`full_edge_${name}_aset_success`] = patternSuccess.get(asetLabel)![i]!;
    }
    progress(`dynamic patterns reported (${((performance.now() - started) / 1000).toFixed(0)} s)`);

    // 6: state-blind mixtures of the best static policy with each other one.
    const cycleRows: string[][] = [];
    for (const { topology, best, runners } of cycles) {
      const bestRuns = await runsOf(topology, lambda60, staticRunner(best));
      let bestGap = -Infinity;
      for (const runner of runners) {
        const runs = await runsOf(topology, lambda60, runner);
        const gap = meanCi(
          runs.map(
            (r, i) => percent(r.counted, 'success') - percent(bestRuns[i]!.counted, 'success'),
          ),
        );
        bestGap = Math.max(bestGap, gap.mean);
        cycleRows.push([
          topology,
          runner.policies.join(' / '),
          formatCi(meanCi(runs.map((r) => percent(r.counted, 'success')))),
          formatCi(gap),
        ]);
      }
      figures[`${snake(topology)}_best_cycle_minus_best_static`] = bestGap;
    }
    printTable(
      `lambda = 60: the best static policy alternated window by window with each other policy, success % (counted from ${warmupMs / 1000} s), mean ± 95% CI over ${settings.seeds.length} seeds`,
      ['topology', 'cycle', 'success %', 'minus the best static (paired)'],
      cycleRows,
    );

    // 5: simulation speed.
    const speedRuns = (
      await Promise.all(policyNames.map((p) => runsOf('full-edge', lambda60, staticRunner(p))))
    ).flat();
    const speeds = speedRuns.map((r) => r.simulatedMs / r.wallMs);
    const speed = median(speeds);
    const oracleRuns = (
      await Promise.all(topologyNames.map((t) => runsOf(t, lambda60, oracleRunner)))
    ).flat();
    printTable(
      'simulation speed (runs share the cores with each other, wall time per run)',
      ['figure', 'value'],
      [
        [
          `full-edge, lambda 60, static policies: simulated s / wall s (median of ${speeds.length} runs)`,
          speed.toFixed(0),
        ],
        [
          'oracle: simulated s spent per simulated s reported (replays + 7 trials per window)',
          median(oracleRuns.map((r) => r.simulatedMs / settings.durationMs)).toFixed(1),
        ],
        [
          'oracle: wall s per run (median over topologies and seeds)',
          median(oracleRuns.map((r) => r.wallMs / 1000)).toFixed(1),
        ],
      ],
    );
    figures.full_edge_speed_x_realtime = speed;
    targets.full_edge_speed_x_realtime = { value: speed, op: '>=', target: 100 };
  } finally {
    await pool.close();
  }

  const wallS = (performance.now() - started) / 1000;
  figures.seeds = settings.seeds.length;
  figures.simulated_minutes = settings.durationMs / 60_000;
  figures.wall_s = wallS;
  process.stdout.write(
    `\nplots: ${plots.map((p) => relative(process.cwd(), p)).join(', ')}\nbest static index: ${policyNames.map((p, i) => `${i} = ${p}`).join(', ')}\nwall time ${wallS.toFixed(0)} s\n`,
  );
  if (!withAset) {
    process.stdout.write(
      'ASET rows and the three ASET targets were skipped (--static-only); only the speed target is checked.\n',
    );
  }
  finish('aset-sim', figures, targets);
}

export { main };
