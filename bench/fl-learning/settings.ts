/**
 * The fl-learning bench's settings: defaults that fit the bench in minutes on two cores, each
 * overridable by an environment variable. A malformed value is refused with a RangeError naming
 * the variable, never silently replaced by the default.
 */

interface Settings {
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
  /** BENCH_FL_ETA_FEDSGD, BENCH_FL_ETA_FEDAVG: a fixed learning rate instead of the grid. */
  readonly rates: { readonly fedsgd?: number; readonly fedavg?: number };
  /** BENCH_FL_EVAL_EVERY: evaluate the global model every this many rounds. */
  readonly evalEvery: number;
  /** BENCH_FL_WORKERS: worker threads training a round's clients (0: the main thread). */
  readonly workers: number;
  /** BENCH_FL_CENTRAL_EPOCHS: epochs of the central baseline. */
  readonly centralEpochs: number;
  /** BENCH_FL_TARGET_POINTS: the target is the central test accuracy minus these points. */
  readonly targetPoints: number;
  /** BENCH_FL_CONDITIONS: comma-separated condition ids to run (empty: all ready ones). */
  readonly only: readonly string[];
  /** BENCH_FL_OUT: the directory the SVG curves are written to. */
  readonly out: string;
}

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

function fixedRates(env: Env): Settings['rates'] {
  const fedsgd = rate(env, 'BENCH_FL_ETA_FEDSGD').value;
  const fedavg = rate(env, 'BENCH_FL_ETA_FEDAVG').value;
  return {
    ...(fedsgd === undefined ? {} : { fedsgd }),
    ...(fedavg === undefined ? {} : { fedavg }),
  };
}

/**
 * The settings from `env`; `defaults.workers` and `defaults.out` are the machine's (threads to
 * use, the checkout's out/ directory).
 */
function parseSettings(env: Env, defaults: { workers: number; out: string }): Settings {
  return {
    seed: integer(env, 'BENCH_FL_SEED', 1, 0),
    clients: integer(env, 'BENCH_FL_CLIENTS', 100, 1),
    fraction: share(env, 'BENCH_FL_FRACTION', 0.1),
    fedsgdMaxRounds: integer(env, 'BENCH_ROUNDS_MAX', 1000, 1),
    fedavgMaxRounds: integer(env, 'BENCH_FL_FEDAVG_ROUNDS_MAX', 300, 1),
    budget: integer(env, 'BENCH_FL_BUDGET', 50, 1),
    raceRoundsFedsgd: integer(env, 'BENCH_FL_RACE_ROUNDS_FEDSGD', 300, 0),
    raceRoundsFedavg: integer(env, 'BENCH_FL_RACE_ROUNDS_FEDAVG', 100, 0),
    rates: fixedRates(env),
    evalEvery: integer(env, 'BENCH_FL_EVAL_EVERY', 1, 1),
    workers: integer(env, 'BENCH_FL_WORKERS', defaults.workers, 0),
    centralEpochs: integer(env, 'BENCH_FL_CENTRAL_EPOCHS', 10, 1),
    targetPoints: points(env, 'BENCH_FL_TARGET_POINTS', 2),
    only: (env['BENCH_FL_CONDITIONS'] ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== ''),
    out: env['BENCH_FL_OUT'] || defaults.out,
  };
}

export { parseSettings };
export type { Settings, Env };
