/**
 * The request workload of the ASET paper's section V-A: at every access point a Poisson
 * generator spawns on average lambda clients per minute, and each client sends one stream whose
 * app is drawn uniformly from Table I and whose characteristics are drawn uniformly from that
 * app's ranges.
 *
 * Everything comes from seeded generators of its own (one per access point, derived from the run
 * seed), never shared with network noise or policy draws: two runs on one seed see the identical
 * streams whatever policy schedules them, which is what makes policies comparable.
 */
import { SeededRandom, seededRandom } from '../../../shared/random/index.js';
import type { AppSpec, Range } from '../../../shared/aset/scenario.js';
import type { Stream } from '../../../shared/aset/types.js';

/** From `fromS` on (until the next step), clients arrive at `lambda` per minute per access point. */
interface LambdaStep {
  readonly fromS: number;
  readonly lambda: number;
}

/**
 * lambda(t), piecewise constant: steps in increasing `fromS`, the first at 0, the last lasting
 * forever. The paper's dynamic patterns are such schedules (`burstLambdaPattern`,
 * `fallingLambdaPattern`).
 */
type LambdaSchedule = readonly LambdaStep[];

/** A constant rate, the paper's default evaluation (lambda = 60). */
function constantLambda(lambda: number): LambdaSchedule {
  return [{ fromS: 0, lambda }];
}

/** `levels` in turn, each for `everyS` seconds, repeated up to `untilS` (the last level stays). */
function cycleSchedule(levels: readonly number[], everyS: number, untilS: number): LambdaSchedule {
  const steps: LambdaStep[] = [];
  for (let k = 0; k * everyS < untilS; k += 1) {
    steps.push({ fromS: k * everyS, lambda: levels[k % levels.length]! });
  }
  return steps;
}

/**
 * The paper's first dynamic pattern ("a particularly fast variation with values of 20, 60, and
 * 100 clients per minute", changing "every 150 seconds"; its figure 6a, "burst variation"), for
 * an hour; longer runs keep the last level.
 */
const burstLambdaPattern: LambdaSchedule = cycleSchedule([20, 60, 100], 150, 3600);

/**
 * The paper's second dynamic pattern: "the requests rate first moves from 60 to 40 clients per
 * minute, then drops to 20, and finally slowly goes back to 60" (figure 6b), every 150 s. It falls
 * in two steps and climbs back in four, 20 -> 30 -> 40 -> 50 -> 60, then stays at 60 (until
 * 2026-11-24 the bench cycled 60 / 40 / 20 and jumped back).
 */
const fallingLambdaPattern: LambdaSchedule = [60, 40, 20, 30, 40, 50, 60].map((lambda, k) => ({
  fromS: 150 * k,
  lambda,
}));

/** The range `randomLambdaSchedule` draws from: the paper's lambdas and its switching period. */
interface RandomScheduleSpec {
  /** Lowest and highest lambda, clients per minute per access point (default 20 and 100). */
  readonly lambda?: readonly [number, number];
  /** Shortest and longest step, seconds (default 60 and 300, around the paper's 150). */
  readonly stepS?: readonly [number, number];
  /** Steps are drawn until this time; the last level stays (default one hour). */
  readonly untilS?: number;
}

/**
 * A random piecewise-constant lambda(t), seeded: each step lasts a uniform draw in `stepS` and
 * holds a uniform integer lambda in `lambda`. What training and the signal bench vary the load
 * with, so that neither ever sees the two evaluation patterns themselves.
 */
function randomLambdaSchedule(seed: number, spec: RandomScheduleSpec = {}): LambdaSchedule {
  const [lo, hi] = spec.lambda ?? [20, 100];
  const [shortest, longest] = spec.stepS ?? [60, 300];
  const untilS = spec.untilS ?? 3600;
  if (!(lo >= 0 && hi >= lo) || !(shortest > 0 && longest >= shortest)) {
    throw new RangeError('randomLambdaSchedule: need 0 <= lambda lo <= hi and 0 < step lo <= hi');
  }
  const uniform = seededRandom(deriveSeed(seed, 'lambda-schedule'));
  const steps: LambdaStep[] = [];
  for (let fromS = 0; fromS < untilS;) {
    steps.push({ fromS, lambda: lo + Math.floor(uniform() * (hi - lo + 1)) });
    fromS += shortest + (longest - shortest) * uniform();
  }
  return steps;
}

/** lambda in force at `tS` seconds. */
function lambdaAt(schedule: LambdaSchedule, tS: number): number {
  let lambda = 0;
  for (const step of schedule) {
    if (step.fromS > tS) break;
    lambda = step.lambda;
  }
  return lambda;
}

function checkSchedule(schedule: LambdaSchedule): void {
  if (schedule[0]?.fromS !== 0) throw new RangeError('a lambda schedule must start at fromS = 0');
  schedule.forEach((step, i) => {
    if (!(step.lambda >= 0) || !Number.isFinite(step.lambda)) {
      throw new RangeError(`lambda schedule step ${i}: lambda must be finite and >= 0`);
    }
    if (i > 0 && !(step.fromS > schedule[i - 1]!.fromS)) {
      throw new RangeError(`lambda schedule step ${i}: fromS must increase`);
    }
  });
}

/**
 * Derives an independent 32-bit seed for one named random stream of a run (FNV-1a over the
 * label, mixed with the run seed), so adding a stream never shifts the draws of another.
 */
function deriveSeed(seed: number, label: string): number {
  let h = 0x811c9dc5 ^ (seed >>> 0);
  for (let i = 0; i < label.length; i += 1) {
    h = Math.imul(h ^ label.charCodeAt(i), 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  return h >>> 0;
}

interface WorkloadOptions {
  readonly apps: readonly AppSpec[];
  /** Scheduler ids, one per access point (`Topology.schedulers` order). */
  readonly schedulers: readonly string[];
  readonly lambda: LambdaSchedule;
  /** Factor on every Table I duration (see `durationScaleFor` in scenario.ts). */
  readonly durationScale: number;
  readonly seed: number;
}

/** One client's stream and when it arrives at its scheduler. */
interface StreamArrival {
  readonly atMs: number;
  readonly stream: Stream;
}

/** One access point's Poisson generator. */
class AccessPointSource {
  private readonly uniform: () => number;
  private step = 0;
  private tS = 0;
  /** Time of the arrival not yet taken, in ms (Infinity: none ever again). */
  nextMs: number;

  /** A generator on `random`, at its first arrival; or, with `from`, a fork of `from`. */
  constructor(
    readonly scheduler: string,
    private readonly schedule: LambdaSchedule,
    private readonly random: SeededRandom,
    from?: AccessPointSource,
  ) {
    this.uniform = random.next;
    if (from === undefined) {
      this.nextMs = this.advance();
    } else {
      this.step = from.step;
      this.tS = from.tS;
      this.nextMs = from.nextMs;
    }
  }

  /** An independent generator in the same state: the same draws, step, time and next arrival. */
  fork(): AccessPointSource {
    return new AccessPointSource(this.scheduler, this.schedule, this.random.clone(), this);
  }

  /**
   * The next arrival time: exponential gaps at the current step's rate; a gap crossing a step
   * boundary is redrawn from the boundary at the new rate (exact, the process being memoryless).
   */
  private advance(): number {
    for (;;) {
      const { lambda } = this.schedule[this.step]!;
      const end = this.schedule[this.step + 1]?.fromS ?? Infinity;
      if (lambda > 0) {
        const gap = -Math.log(1 - this.uniform()) / (lambda / 60);
        if (this.tS + gap < end) {
          this.tS += gap;
          return this.tS * 1000;
        }
      }
      if (end === Infinity) return Infinity;
      this.tS = end;
      this.step += 1;
    }
  }

  /** Draws the characteristics of the arrival at `nextMs` and moves on to the next one. */
  take(id: number, apps: readonly AppSpec[], durationScale: number): StreamArrival {
    const u = this.uniform;
    const draw = ([lo, hi]: Range) => lo + (hi - lo) * u();
    const atMs = this.nextMs;
    // Always the same seven draws in the same order, whatever the app, so one client's draws
    // never depend on what an earlier client turned out to be.
    const app = apps[Math.min(apps.length - 1, Math.floor(u() * apps.length))]!;
    const rate = draw(app.frameRateFps);
    const maxDelayMs = draw(app.maxDelayMs);
    const durationS = draw(app.durationS) * durationScale;
    const size = draw(app.sizeRange);
    const transmissionMsPerSize = draw(app.transmissionMsPerSize);
    const accessDelayMs = draw(app.accessDelayMs);
    this.nextMs = this.advance();
    return {
      atMs,
      stream: {
        id,
        app: app.name,
        task: app.task,
        maxDelayMs,
        minAccuracy: app.minAccuracy,
        rate,
        size,
        transmissionMsPerSize,
        accessDelayMs,
        durationS,
        scheduler: this.scheduler,
      },
    };
  }
}

/**
 * All access points' arrivals merged in time order, generated lazily (a simulation can run
 * indefinitely). Stream ids count arrivals in that order from 0; simultaneous arrivals (of
 * probability zero) go to the lower access point first.
 */
class Workload {
  private sources: AccessPointSource[];
  private nextId = 0;

  constructor(private readonly options: WorkloadOptions) {
    checkSchedule(options.lambda);
    if (options.apps.length === 0) throw new RangeError('a workload needs at least one app');
    if (!(options.durationScale > 0)) throw new RangeError('durationScale must be positive');
    this.sources = options.schedulers.map(
      (scheduler, i) =>
        new AccessPointSource(
          scheduler,
          options.lambda,
          new SeededRandom(deriveSeed(options.seed, `workload/${i}`)),
        ),
    );
  }

  /**
   * An independent workload standing where this one stands: every access point's generator in
   * the same state and the same next stream id, so it yields exactly the arrivals this one would.
   */
  fork(): Workload {
    const copy = new Workload(this.options);
    copy.sources = this.sources.map((source) => source.fork());
    copy.nextId = this.nextId;
    return copy;
  }

  private earliest(): AccessPointSource | undefined {
    let best: AccessPointSource | undefined;
    for (const source of this.sources) {
      if (best === undefined || source.nextMs < best.nextMs) best = source;
    }
    return best;
  }

  /** When the next stream arrives, in ms; Infinity when none ever will. */
  peekMs(): number {
    return this.earliest()?.nextMs ?? Infinity;
  }

  /** The next stream arrival. Throws when there is none (check `peekMs` first). */
  next(): StreamArrival {
    const source = this.earliest();
    if (source === undefined || source.nextMs === Infinity) {
      throw new RangeError('the workload has no further arrivals');
    }
    const arrival = source.take(this.nextId, this.options.apps, this.options.durationScale);
    this.nextId += 1;
    return arrival;
  }
}

/** Every arrival before `untilMs`, for analysis and tests. */
function generateStreams(options: WorkloadOptions, untilMs: number): StreamArrival[] {
  const workload = new Workload(options);
  const arrivals: StreamArrival[] = [];
  while (workload.peekMs() < untilMs) arrivals.push(workload.next());
  return arrivals;
}

/**
 * Queries a stream sends: one every 1 / rate seconds from its arrival for its duration, the
 * first at the arrival itself; at least one, so a stream always has something to count.
 */
function queriesOf(stream: Stream): number {
  return Math.max(1, Math.round(stream.durationS * stream.rate));
}

export {
  constantLambda,
  burstLambdaPattern,
  fallingLambdaPattern,
  randomLambdaSchedule,
  lambdaAt,
  deriveSeed,
  Workload,
  generateStreams,
  queriesOf,
};
export type { LambdaStep, LambdaSchedule, RandomScheduleSpec, WorkloadOptions, StreamArrival };
