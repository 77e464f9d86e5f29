/**
 * What an edge service has seen lately, shared by its replicas: per hardness band the traffic,
 * the samples answered by both tiers and their disagreements (for the accuracy objective), and
 * per input whether the drift detector found it an outlier. Counts live in Redis as a list of
 * buckets of about `bucketSize` inputs, the newest `buckets` kept, so memory is bounded, replicas
 * read the same window and a restarted worker resumes from it.
 *
 * Each replica adds up what it saw and sends it every `refreshMs` in one script that appends to
 * the newest bucket, exactly once per delivery id: a send whose reply was lost is resent under
 * the same id and not counted twice. The drift state lives beside the buckets; when the test's
 * verdict changes, one replica flips it with a compare-and-set that also opens a bucket marked as
 * a reset, and calibration reads only from the newest reset on: after a shift, evidence from
 * before it would hold the cut where it no longer belongs.
 */
// By file, not the domain's index: the index loads ioredis, which a worker without Redis never needs.
import { runScript } from '../redis/client.js';
import type { RedisClient } from '../redis/client.js';
import { defineIdempotentScript } from '../redis/idempotency.js';
import { hashTag, key } from '../redis/keys.js';
import { addQuality, flipDrift } from './lua/index.js';
import { repeat } from './repeat.js';
import type { Logger } from '../telemetry/index.js';
import { bandCount, bandOf, chooseCut, driftTest } from './objective.js';
import type { CalibrationSettings, CutEstimate, DriftSettings, DriftVerdict } from './objective.js';

/** One bucket as stored: per band the traffic, the labelled and their summed loss; inputs, scored, outliers. */
interface Bucket {
  t: number[];
  n: number[];
  k: number[];
  i: number;
  s: number;
  o: number;
  /** 1 when the bucket was opened by a drift flip. */
  r: number;
}

interface QualityWindowOptions {
  redis: RedisClient | undefined;
  /** `<namespace>/<name>`: replicas of one service share a window. */
  service: string;
  /** Unique per worker process: names its deliveries. */
  reporter: string;
  bucketSize: number;
  buckets: number;
  /**
   * The drift test reads the newest buckets that together hold at least this many scored inputs
   * (scoring is sampled, so a count of buckets would hold a varying number of them).
   */
  driftWindow: number;
  refreshMs: number;
  calibration: CalibrationSettings | undefined;
  drift: DriftSettings | undefined;
  log: Logger;
}

interface QualityState {
  /** Undefined without an objective, or before the first refresh. */
  estimate: CutEstimate | undefined;
  /** Undefined without a drift reference, or before the first refresh. */
  drift: DriftVerdict | undefined;
  /** Inputs in the drift test's window. */
  driftInputs: number;
}

interface QualityWindow {
  /** One input: its hardness band, and whether the drift detector called it an outlier. */
  observe(band: number, outlier: boolean | undefined): void;
  /** One input answered by both tiers, and what the edge's answer lost against the cloud's. */
  label(band: number, loss: number): void;
  /** True/false under the objective; undefined when it has no say (no objective, no window yet). */
  isHard(hardness: number): boolean | undefined;
  state(): QualityState;
  refresh(): Promise<void>;
  stop(): void;
}

const emptyBucket = (reset: boolean): Bucket => ({
  t: new Array<number>(bandCount).fill(0),
  n: new Array<number>(bandCount).fill(0),
  k: new Array<number>(bandCount).fill(0),
  i: 0,
  s: 0,
  o: 0,
  r: reset ? 1 : 0,
});

const ttlSeconds = 7 * 24 * 3600;
/** Traffic-triggered refreshes come at most this often (the timer's may come more often). */
const minRefreshMs = 50;

/** Sums of the window the decisions read. */
function summarize(buckets: readonly Bucket[], driftWindow: number) {
  let from = 0;
  for (let i = buckets.length - 1; i >= 0; i -= 1) {
    if (buckets[i]!.r === 1) {
      from = i;
      break;
    }
  }
  const traffic = new Array<number>(bandCount).fill(0);
  const labelled = new Array<number>(bandCount).fill(0);
  const disagree = new Array<number>(bandCount).fill(0);
  for (const b of buckets.slice(from)) {
    for (let j = 0; j < bandCount; j += 1) {
      traffic[j]! += b.t[j] ?? 0;
      labelled[j]! += b.n[j] ?? 0;
      disagree[j]! += b.k[j] ?? 0;
    }
  }
  let scored = 0;
  let outliers = 0;
  for (let i = buckets.length - 1; i >= 0 && scored < driftWindow; i -= 1) {
    scored += buckets[i]!.s;
    outliers += buckets[i]!.o;
  }
  return { counts: { traffic, labelled, disagree }, scored, outliers };
}

/** Where the buckets live: Redis for a service's replicas, memory for a worker on its own. */
interface BucketStore {
  add(delta: Bucket, delivery: string): Promise<{ buckets: Bucket[]; drifting: boolean }>;
  flip(from: boolean, to: boolean): Promise<void>;
}

function redisStore(redis: RedisClient, options: QualityWindowOptions): BucketStore {
  const tag = hashTag(options.service);
  const keys = [key('quality', tag, 'buckets'), key('quality', tag, 'drift')];
  const add = defineIdempotentScript(redis, addQuality, { ttlSeconds: 3600 });
  return {
    async add(delta, delivery) {
      const outcome = await add(
        { source: `quality/${options.reporter}`, id: delivery, tag: options.service },
        keys,
        [JSON.stringify(delta), options.bucketSize, options.buckets, ttlSeconds],
      );
      // Already applied under this id (a lost reply): the next send reads the window.
      if (!outcome.applied) return { buckets: [], drifting: false };
      const [raw, drifting] = outcome.result as [string[], string];
      return { buckets: raw.map((b) => JSON.parse(b) as Bucket), drifting: drifting === '1' };
    },
    async flip(from, to) {
      await runScript(
        redis,
        flipDrift,
        [
          ...keys,
          from ? '1' : '0',
          to ? '1' : '0',
          JSON.stringify(emptyBucket(true)),
          String(options.buckets),
          String(ttlSeconds),
        ],
        Number,
      );
    },
  };
}

function memoryStore(options: QualityWindowOptions): BucketStore {
  const buckets: Bucket[] = [];
  let drifting = false;
  return {
    add(delta) {
      let last = buckets.at(-1);
      if (last === undefined || last.i >= options.bucketSize) {
        last = emptyBucket(false);
        buckets.push(last);
      }
      for (let j = 0; j < bandCount; j += 1) {
        last.t[j]! += delta.t[j]!;
        last.n[j]! += delta.n[j]!;
        last.k[j]! += delta.k[j]!;
      }
      last.i += delta.i;
      last.s += delta.s;
      last.o += delta.o;
      buckets.splice(0, Math.max(0, buckets.length - options.buckets));
      // Read-only to the caller (summarize), so no copy: this runs on every refresh.
      return Promise.resolve({ buckets, drifting });
    },
    flip(from, to) {
      if (drifting === from) {
        drifting = to;
        buckets.push(emptyBucket(true));
        buckets.splice(0, Math.max(0, buckets.length - options.buckets));
      }
      return Promise.resolve();
    },
  };
}

/**
 * The drift test on this replica's last `size` scored inputs, checked as each arrives: a shift
 * shows here one refresh before the shared window can say so, and every input answered at the
 * old cut in between is one the objective pays for. A suspicion only ever offloads more, and
 * lasts until the next refresh reads the window.
 */
function localDriftCheck(settings: DriftSettings | undefined, size = 100) {
  const recent = new Uint8Array(size);
  let seen = 0;
  let outliers = 0;
  let suspect = false;
  return {
    add(outlier: boolean, drifting: boolean) {
      if (settings === undefined) return;
      const slot = seen % size;
      outliers += Number(outlier) - recent[slot]!;
      recent[slot] = outlier ? 1 : 0;
      seen += 1;
      if (!drifting && seen >= size) {
        suspect ||= driftTest(outliers, size, { ...settings, minInputs: size }, false).drifting;
      }
    },
    suspect: () => suspect,
    settle() {
      suspect = false;
    },
  };
}

/**
 * The window's verdict: the drift test over its newest scored inputs (a change of verdict is
 * recorded in the store, so every replica recalibrates alike) and the cut the objective picks,
 * which stops assuming the loss rises with hardness once the inputs drift (see bandRates).
 */
async function judgeWindow(
  options: QualityWindowOptions,
  store: Pick<BucketStore, 'flip'>,
  buckets: readonly Bucket[],
  drifting: boolean,
): Promise<QualityState> {
  const { counts, scored, outliers } = summarize(buckets, options.driftWindow);
  const drift =
    options.drift === undefined ? undefined : driftTest(outliers, scored, options.drift, drifting);
  if (drift !== undefined && drift.drifting !== drifting) {
    await store.flip(drifting, drift.drifting);
    options.log.info(
      { score: Number(drift.score.toFixed(2)), share: Number(drift.share.toFixed(4)) },
      drift.drifting ? 'input drift detected; recalibrating' : 'input drift cleared; recalibrating',
    );
  }
  return {
    estimate:
      options.calibration === undefined
        ? undefined
        : chooseCut(counts, options.calibration, drift?.drifting !== true),
    drift,
    driftInputs: scored,
  };
}

function createQualityWindow(options: QualityWindowOptions): QualityWindow {
  const store =
    options.redis === undefined ? memoryStore(options) : redisStore(options.redis, options);
  let pending = emptyBucket(false);
  /** A send that failed, resent alone under its id before anything newer. */
  let unsent: { delta: Bucket; delivery: string } | undefined;
  let sequence = 0;
  let state: QualityState = { estimate: undefined, drift: undefined, driftInputs: 0 };
  let running: Promise<void> | undefined;
  const local = localDriftCheck(options.drift);
  let lastRefresh = performance.now();

  const decide = async (buckets: readonly Bucket[], drifting: boolean) => {
    if (buckets.length === 0) return;
    state = await judgeWindow(options, store, buckets, drifting);
    local.settle();
  };

  const send = async () => {
    if (unsent === undefined) {
      sequence += 1;
      unsent = { delta: pending, delivery: String(sequence) };
      pending = emptyBucket(false);
    }
    const { buckets, drifting } = await store.add(unsent.delta, unsent.delivery);
    unsent = undefined;
    await decide(buckets, drifting);
  };

  const refresh = (): Promise<void> => {
    // One send at a time: a second would race the first for the same delivery.
    running ??= send().finally(() => (running = undefined));
    return running;
  };

  const stop = repeat(
    options.refreshMs,
    refresh,
    options.log,
    'quality window refresh failed; keeping the last cut and resending',
  );

  return {
    observe(band, outlier) {
      // Bounded like the window itself: a Redis outage must not grow memory without limit.
      if (pending.i >= options.bucketSize * options.buckets) return;
      pending.t[band]! += 1;
      pending.i += 1;
      if (outlier !== undefined) {
        pending.s += 1;
        if (outlier) pending.o += 1;
        local.add(outlier, state.drift?.drifting ?? false);
      }
      // A refresh by traffic as well as by time (at high rates a timer alone lets thousands of
      // inputs through between two looks at the window), but at most every `minRefreshMs`: each
      // one is a Redis round trip and a pass over the window.
      if (pending.i % 64 === 0 && running === undefined && options.refreshMs > 0) {
        const now = performance.now();
        if (now - lastRefresh >= minRefreshMs) {
          lastRefresh = now;
          refresh().catch(() => undefined);
        }
      }
    },
    label(band, loss) {
      pending.n[band]! += 1;
      pending.k[band]! += loss;
    },
    isHard(hardness) {
      const estimate = state.estimate;
      if (estimate === undefined) return undefined;
      // This replica's own recent inputs look shifted: offload until the window has decided.
      if (local.suspect()) return true;
      return bandOf(hardness) >= estimate.cut;
    },
    state: () => state,
    refresh,
    stop,
  };
}

export { createQualityWindow };
export type { QualityWindow, QualityWindowOptions, QualityState, Bucket };
