/**
 * A federated job's aggregator: opens rounds, takes each trainer's update once, closes a round on
 * its quorum or at its deadline, averages the weights by sample count (FedAvg) into the next
 * global ONNX model, evaluates it, checkpoints it, and opens the next round or ends the job on its
 * stop condition. All of its state is the round store's (Redis): a restarted aggregator resumes
 * where the job was, and one killed mid-aggregation leaves its claim to lapse, after which the
 * same stored updates are averaged again — nothing lost, nothing counted twice.
 *
 * Side effects come in: the store, the initial model's bytes, how a trainer is told of a round,
 * how the end of a round is announced, the clock and the timer.
 */
import { createHash, randomUUID } from 'node:crypto';
import { UnavailableError, ValidationError } from '../errors/index.js';
import type {
  FlJobConfig,
  RoundStarted,
  RoundSummary,
  TrainerFailed,
} from '../messages/federated.js';
import type { Logger } from '../telemetry/index.js';
import { onnxLayers, readInitializers, replaceInitializers } from '../training/onnx-export.js';
import { checkUpdate } from './fedavg.js';
import type { WeightUpdate } from './fedavg.js';
import { epsilonSpent } from './strategy/accountant.js';
import { aggregate as combine } from './strategy/aggregate.js';
import { bufferedStep, modelDelta } from './strategy/fedbuff.js';
import { selectClients } from './strategy/selection.js';
import { decodeState, encodeState, initialState } from './strategy/state.js';
import type { AggregationReport, Strategy, StrategyState } from './strategy/types.js';
import type { Evaluation } from './local-train.js';
import type { ClaimOutcome, OfferOutcome, RoundState, RoundStore } from './round-store.js';
import { decodeWeights, encodeWeights } from './weights.js';
import type { NamedTensors, Tensor } from './weights.js';

/** An update's metadata as stored beside its weights. */
interface UpdateMeta {
  samples: number;
  loss?: number;
  trainMs?: number;
}

/** UpdateMeta and the model version the update trained from. */
type StoredMeta = UpdateMeta & { base: number };

/** The job's FedBuff settings when its rounds are asynchronous. */
type Buffered = Extract<FlJobConfig['aggregation'], { kind: 'fedbuff' }>;

const buffered = (config: FlJobConfig): Buffered | undefined =>
  config.aggregation.kind === 'fedbuff' ? config.aggregation : undefined;

/** What a round event and GET /v1/round add for asynchronous rounds. */
function staleness(config: FlJobConfig): { maxStaleness?: number } {
  const fedbuff = buffered(config);
  return fedbuff === undefined ? {} : { maxStaleness: fedbuff.maxStaleness };
}

/**
 * The job's first round has not opened yet (its aggregator is starting): retryable, and expected
 * while trainers that started first ask for their round.
 */
class JobNotStartedError extends UnavailableError {}

interface AggregatorDeps {
  config: FlJobConfig;
  store: RoundStore;
  /** Round 1's model (the pretrained Model's bytes). */
  initialModel(): Promise<Uint8Array>;
  /** Measures a new global model on the job's evaluation Dataset, if it names one. */
  evaluate?: (model: Uint8Array) => Promise<Evaluation>;
  /**
   * Tells a trainer of a round, with the model it trains from (the messenger decides whether the
   * bytes travel with the event or the trainer downloads them); settles when it is told.
   */
  notify(
    trainer: FlJobConfig['trainers'][number],
    event: RoundStarted,
    model: Uint8Array,
  ): Promise<void>;
  /** A round ended (the job's status should show it). */
  announce(summary: RoundSummary): Promise<void>;
  now: () => number;
  /** Runs `fn` at `atMs`; the returned function cancels it. */
  schedule: (atMs: number, fn: () => void) => () => void;
  /** Run once the start-up's warm-up is done, before a round is taken (collect-garbage.ts). */
  settle?: () => void;
  log: Logger;
  /** How long a claim on a round holds (a dead aggregator's lapses after this). */
  leaseMs: number;
  maxUpdateBytes: number;
  /**
   * Hands back an update's bytes once nothing holds a view of them: at once when it was not
   * kept, after its round's step when it was (the decoded weights are views of them). The
   * function passes shared/http's releaseBody, so the next update is read into the same memory;
   * default: nothing (the collector takes them).
   */
  release?: (bytes: Uint8Array) => void;
}

/** What GET /v1/round answers: what a trainer needs to join the open round. */
interface RoundView {
  job: string;
  round: number;
  base: number;
  status: RoundState['status'];
  selected: string[];
  submitted: string[];
  deadline: string;
  model: { url: string; sha256: string };
  training: FlJobConfig['training'];
  /** Asynchronous rounds: how many versions behind the base an update may be. */
  maxStaleness?: number;
}

interface Aggregator {
  /** Opens round 1 or resumes the job where its store says it is. */
  start(): Promise<void>;
  /** One trainer's update, its sender already authenticated. */
  offer(update: {
    worker: string;
    round: number;
    base: number;
    meta: UpdateMeta;
    weights: Uint8Array;
  }): Promise<OfferOutcome>;
  reportFailure(failure: TrainerFailed): Promise<void>;
  round(): Promise<RoundView>;
  model(version: number): Promise<Buffer | undefined>;
  /** Closes a round that is due and takes over a lapsed claim (the PingSource tick, a timer). */
  tick(): Promise<void>;
  close(): void;
}

const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

/**
 * The trainers round `round` asks: a seeded sample of those still in the job (all of them unless
 * the job asks for a fraction), the same on every replica and after every restart.
 */
function selection(config: FlJobConfig, round: number): { selected: string[]; quorum: number } {
  const fedbuff = buffered(config);
  if (fedbuff !== undefined) {
    // A buffer takes an update from any trainer of the job; it steps every bufferSize.
    const selected = config.trainers.map((t) => t.name);
    return { selected, quorum: Math.min(fedbuff.bufferSize, selected.length) };
  }
  const selected = selectClients({
    available: config.trainers.map((t) => t.name),
    ...config.selection,
    round,
  });
  return { selected, quorum: Math.min(config.round.minParticipants, selected.length) };
}

/** Whether the job stops after `summary`, and why. */
function stopReason(
  config: FlJobConfig,
  summary: RoundSummary,
  earlier: readonly RoundSummary[],
): string | undefined {
  const { maxRounds, targetAccuracy, minLossImprovement, patience } = config.stop;
  if (summary.round >= maxRounds) return `maxRounds ${maxRounds} reached`;
  if (targetAccuracy !== undefined && (summary.accuracy ?? -1) >= targetAccuracy)
    return `accuracy ${summary.accuracy?.toFixed(4)} reached targetAccuracy ${targetAccuracy}`;
  if (minLossImprovement === undefined || summary.loss === undefined) return undefined;
  const losses = [summary, ...earlier].slice(0, patience + 1).map((s) => s.loss);
  if (losses.length < patience + 1 || losses.some((l) => l === undefined)) return undefined;
  const stalled = losses
    .slice(0, patience)
    .every((l, i) => losses[i + 1]! - l! < minLossImprovement);
  return stalled
    ? `loss improved by less than ${minLossImprovement} for ${patience} round(s)`
    : undefined;
}

/**
 * Whether round `round`'s model is evaluated beside the next round rather than before it opens:
 * when the job's stop condition does not read the evaluation (no target accuracy, no loss
 * improvement) and the round is not the last, nothing waits for it.
 */
function evaluatesBeside(config: FlJobConfig, round: number): boolean {
  const { maxRounds, targetAccuracy, minLossImprovement } = config.stop;
  return targetAccuracy === undefined && minLossImprovement === undefined && round < maxRounds;
}

/** The samples-weighted mean of the participants' reported losses (no evaluation Dataset). */
function reportedLoss(metas: readonly UpdateMeta[]): number | undefined {
  const known = metas.filter((m) => m.loss !== undefined);
  const samples = known.reduce((sum, m) => sum + m.samples, 0);
  if (known.length === 0 || samples === 0) return undefined;
  return known.reduce((sum, m) => sum + m.samples * (m.loss ?? 0), 0) / samples;
}

/** One aggregator's process state: its deps, the cached base model, its timer, its close. */
interface Run {
  deps: AggregatorDeps;
  base?: {
    version: number;
    bytes: Uint8Array;
    tensors: NamedTensors;
    /** What the strategy carried out of the round that made this version, once known. */
    strategyState?: StrategyState;
  };
  /** The job's strategy, once built (central DP's seed comes from the store). */
  strategy?: Strategy;
  cancelTimer?: () => void;
  closing?: Promise<void>;
  /** The last committed round's evaluation, running beside the next round (evaluateBeside). */
  evaluating?: Promise<void>;
  again?: boolean;
  /**
   * The weights of the updates this process accepted for the open round, decoded and checked:
   * aggregated from here rather than read back from the store (a restarted process reads them).
   */
  accepted: Map<string, { round: number; weights: NamedTensors; bytes: Uint8Array }>;
  /**
   * FedBuff: versions before the held one that stale updates trained from, decoded once for the
   * offer's check and the step's delta (a version's model never changes).
   */
  older: Map<number, NamedTensors>;
}

const modelUrl = (run: Run, version: number) => `${run.deps.config.publicUrl}/v1/models/${version}`;

/**
 * The model an update on `version` is checked against: the one held when it is that version (a
 * version's model never changes), else the open round's base when the update names it; undefined
 * for an update offer.lua will refuse (no open round, another base).
 */
async function checkedAgainst(
  run: Run,
  version: number,
): Promise<{ version: number; tensors: NamedTensors } | undefined> {
  if (run.base?.version === version) return run.base;
  const state = await run.deps.store.state();
  if (state?.status !== 'open') return undefined;
  if (state.base === version) return baseModel(run, version);
  const behind = state.base - version;
  const fedbuff = buffered(run.deps.config);
  if (fedbuff === undefined || behind < 0 || behind > fedbuff.maxStaleness) return undefined;
  return olderModel(run, version);
}

/** A version before the held one (FedBuff's stale updates are checked and stepped from it). */
async function olderModel(run: Run, version: number) {
  const held = run.older.get(version);
  if (held !== undefined) return { version, tensors: held };
  const bytes = await run.deps.store.model(version);
  if (bytes === undefined) throw new Error(`model version ${version} is not stored`);
  const tensors = readInitializers(bytes);
  run.older.set(version, tensors);
  return { version, tensors };
}

async function baseModel(run: Run, version: number) {
  if (run.base?.version === version) return run.base;
  const bytes = await run.deps.store.model(version);
  if (bytes === undefined) throw new Error(`model version ${version} is not stored`);
  run.base = { version, bytes, tensors: readInitializers(bytes) };
  return run.base;
}

/** The job's strategy as the aggregation runs it: central DP gets the job's secret seed. */
async function strategyOf(run: Run): Promise<Strategy> {
  if (run.strategy !== undefined) return run.strategy;
  const configured = run.deps.config.aggregation;
  if (configured.kind === 'fedbuff') throw new Error('a FedBuff job steps by bufferedStep');
  if (configured.kind !== 'dp-fixed-clipping') return (run.strategy = configured);
  const { noiseMultiplier, clippingNorm, sampled, inner } = configured;
  const seed = await run.deps.store.secretSeed();
  run.strategy = {
    kind: 'dp-fixed-clipping',
    noiseMultiplier,
    clippingNorm,
    sampledClients: sampled,
    seed,
    inner,
  };
  return run.strategy;
}

/** What the strategy carried out of the round that made `version` (none: nothing stored). */
async function strategyState(
  run: Run,
  version: number,
  maxTensors: number,
): Promise<StrategyState> {
  if (run.base?.version === version && run.base.strategyState !== undefined)
    return run.base.strategyState;
  const text = await run.deps.store.strategyState(version);
  if (text === undefined) return initialState;
  // Two moments per tensor.
  return decodeState(text, { maxBytes: 4 * run.deps.maxUpdateBytes, maxTensors: 2 * maxTensors });
}

/** Central DP: the epsilon the job has spent after `round` rounds (undefined without DP). */
function epsilonOf(config: FlJobConfig, round: number): number | undefined {
  const dp = config.aggregation;
  if (dp.kind !== 'dp-fixed-clipping') return undefined;
  const samplingRate = Math.min(1, dp.sampled / config.trainers.length);
  const { noiseMultiplier, delta } = dp;
  if (noiseMultiplier === 0) return undefined; // clipping alone: no epsilon to state
  return epsilonSpent({ samplingRate, noiseMultiplier, rounds: round, delta }).epsilon;
}

function arm(run: Run, atMs: number): void {
  run.cancelTimer?.();
  run.cancelTimer = run.deps.schedule(atMs, () => kick(run));
}

/** Tells every selected trainer that has not sent its update yet; failures are logged. */
async function announceRound(run: Run, state: RoundState): Promise<void> {
  const { config, store, log } = run.deps;
  const submitted = new Set(await store.submitted());
  const { bytes } = await baseModel(run, state.base);
  const event: RoundStarted = {
    job: config.job,
    round: state.round,
    base: state.base,
    model: { url: modelUrl(run, state.base), sha256: state.sha },
    training: config.training,
    deadline: new Date(state.deadlineMs).toISOString(),
    ...staleness(config),
  };
  for (const trainer of config.trainers) {
    if (!state.selected.includes(trainer.name) || submitted.has(trainer.name)) continue;
    run.deps.notify(trainer, event, bytes).catch((err: unknown) => {
      log.warn({ err, trainer: trainer.name, round: state.round }, 'trainer not told of the round');
    });
  }
}

async function start(run: Run): Promise<void> {
  const { config, store, log } = run.deps;
  const state = await store.state();
  if (state === undefined) {
    const bytes = await run.deps.initialModel();
    if (onnxLayers(bytes) === undefined)
      throw new ValidationError('the initial model was not written by the project (no layers)');
    await store.saveModel(0, bytes);
    await warmUp(run, bytes);
    await evaluateInitial(run, bytes);
    run.deps.settle?.();
    const { created } = await store.open({ ...nextRound(run, 1), sha: sha256(bytes) });
    if (created) log.info({ job: config.job }, 'round 1 opened');
  } else if (state.status === 'open' || state.status === 'aggregating') {
    await warmUp(run, (await baseModel(run, state.base)).bytes);
    run.deps.settle?.();
  }
  await resume(run);
}

/**
 * What every round runs on the updates — decode, check, aggregate, write the model — run once on
 * `model` before the process takes a round: a function's first runs are the slowest (the JIT
 * has not compiled it yet), and they would otherwise be the first round's close. The strategy
 * may refuse a single update (Krum): what ran until then is warm.
 */
async function warmUp(run: Run, model: Uint8Array): Promise<void> {
  const tensors = readInitializers(model);
  const limits = { maxBytes: run.deps.maxUpdateBytes, maxTensors: tensors.size };
  const weights = decodeWeights(encodeWeights(tensors), limits);
  const update = { worker: 'warm-up', samples: 1, weights };
  checkUpdate(tensors, update);
  try {
    const warmed = await step(run, { base: 0, round: 1 }, tensors, [update], [{ samples: 1 }]);
    replaceInitializers(model, warmed.weights);
  } catch (err) {
    if (!(err instanceof ValidationError)) throw err;
  }
}

/**
 * The initial model measured before round 1 opens, as Flower measures its initial parameters
 * (its round 0): logged. The evaluator's first run (the runtime loaded, the evaluation set
 * parsed) is then not on a round's path, where it would hold up the round's fan-out.
 */
async function evaluateInitial(run: Run, model: Uint8Array): Promise<void> {
  const { evaluate, log } = run.deps;
  await evaluate?.(model).then(
    (evaluation) => log.info({ ...evaluation }, 'the initial model evaluated'),
    (err: unknown) => log.warn({ err }, 'the initial model could not be evaluated'),
  );
}

/** Picks up whatever the store says: an open round is told again and timed; a due one closed. */
async function resume(run: Run): Promise<void> {
  await tellOpenRound(run);
  await evaluateMissed(run);
  await tick(run);
}

/** The open round, if any, timed and told to the trainers that still owe their update. */
async function tellOpenRound(run: Run): Promise<void> {
  const state = await run.deps.store.state();
  if (state?.status !== 'open') return;
  arm(run, state.deadlineMs);
  await announceRound(run, state);
}

/** An update's bytes back to their owner (AggregatorDeps.release), when one was given. */
function release(run: Run, bytes: Uint8Array): void {
  run.deps.release?.(bytes);
}

/** Forgets every accepted update (their step is done) and hands their bytes back. */
function forgetAccepted(run: Run): void {
  const kept = [...run.accepted.values()];
  run.accepted.clear();
  for (const { bytes } of kept) release(run, bytes);
}

async function offer(run: Run, update: Parameters<Aggregator['offer']>[0]): Promise<OfferOutcome> {
  const stored = await checkAndStore(run, update).catch((err: unknown) => {
    release(run, update.weights);
    throw err;
  });
  // Kept: its round's step hands it back. Else stored in Redis (ioredis wrote a copy of it) or
  // refused: nothing holds a view of it any more.
  if (!stored.kept) release(run, update.weights);
  return stored.outcome;
}

/** The update checked and offered to the store; `kept` when its decoded weights were kept. */
async function checkAndStore(
  run: Run,
  update: Parameters<Aggregator['offer']>[0],
): Promise<{ outcome: OfferOutcome; kept: boolean }> {
  const { store, maxUpdateBytes } = run.deps;
  // Checked against the round's base model now, so a malformed update is a 400 to its sender
  // rather than a failure of the whole round later. The model this process holds is the open
  // round's base unless another process moved the job on: then the state says which it is.
  // offer.lua decides what is accepted either way.
  const base = await checkedAgainst(run, update.base);
  let decoded: NamedTensors | undefined;
  if (base !== undefined) {
    const limits = { maxBytes: maxUpdateBytes, maxTensors: base.tensors.size };
    decoded = decodeWeights(update.weights, limits);
    const { worker, meta } = update;
    checkUpdate(base.tensors, { worker, samples: meta.samples, weights: decoded });
  }
  const fedbuff = buffered(run.deps.config);
  const outcome = await store.offer({
    round: update.round,
    worker: update.worker,
    base: update.base,
    // The version it trained from: a buffered round's updates may each have their own.
    meta: JSON.stringify({ ...update.meta, base: update.base } satisfies StoredMeta),
    weights: Buffer.from(update.weights.buffer, update.weights.byteOffset, update.weights.length),
    nowMs: run.deps.now(),
    ...(fedbuff === undefined ? {} : { maxStaleness: fedbuff.maxStaleness }),
  });
  let kept = false;
  if (outcome.kind === 'accepted' && decoded !== undefined) {
    // An earlier entry it replaces (a round another process stepped) is left to the collector:
    // a step in flight may still read it.
    run.accepted.set(update.worker, {
      round: outcome.round,
      weights: decoded,
      bytes: update.weights,
    });
    kept = true;
  }
  if (outcome.kind === 'accepted' && outcome.n >= Math.min(outcome.quorum, outcome.selected))
    kick(run);
  return { outcome, kept };
}

/**
 * Closes the open round if it is due; one close at a time in this process. A tick asked for
 * while one runs (the quorum's update arriving after that close found the round waiting) runs
 * once more after it.
 */
function tick(run: Run): Promise<void> {
  if (run.closing !== undefined) {
    run.again = true;
    return run.closing;
  }
  run.closing = closeDue(run).finally(() => {
    run.closing = undefined;
    if (run.again) {
      run.again = false;
      kick(run);
    }
  });
  return run.closing;
}

/**
 * A tick nobody awaits (a timer, an update that made the quorum): a failure (Redis away, say) is
 * logged and tried again shortly; the PingSource and a restart also close a due round.
 */
function kick(run: Run): void {
  tick(run).catch((err: unknown) => {
    run.deps.log.error({ err }, 'closing the round failed; trying again in 5 s');
    arm(run, run.deps.now() + 5000);
  });
}

async function closeDue(run: Run): Promise<void> {
  const { store, leaseMs } = run.deps;
  const state = await store.state();
  if (state === undefined || state.status === 'done' || state.status === 'failed') return;
  const token = randomUUID();
  const claim = await store.claim(state.round, token, run.deps.now(), leaseMs);
  if (claim.kind === 'claimed') await aggregate(run, state, token, claim);
  else if (claim.kind === 'waiting') arm(run, claim.deadlineMs);
  else if (claim.kind === 'busy') arm(run, claim.untilMs);
}

type Claimed = Extract<ClaimOutcome, { kind: 'claimed' }>;

/** The claimed round's outcome: averaged and committed, opened again, or the job failed. */
async function aggregate(run: Run, state: RoundState, token: string, claim: Claimed) {
  const { config, store, log } = run.deps;
  const known = new Set(
    [...run.accepted].filter(([, u]) => u.round === state.round).map(([worker]) => worker),
  );
  const stored = await store.updates(known);
  if (
    claim.closedBy === 'deadline' &&
    stored.length < state.quorum &&
    !config.round.acceptFailures
  ) {
    const message = `round ${state.round} had ${stored.length} of the ${state.quorum} updates its quorum needs by its deadline (acceptFailures: false)`;
    await store.commit({
      round: state.round,
      token,
      outcome: 'failed',
      nowMs: run.deps.now(),
      message,
    });
    log.warn({ round: state.round }, message);
    return;
  }
  if (stored.length === 0) return retry(run, state, token);
  const { bytes, tensors } = await baseModel(run, state.base);
  const metas = stored.map((u) => JSON.parse(u.meta) as UpdateMeta);
  const limits = { maxBytes: run.deps.maxUpdateBytes, maxTensors: tensors.size };
  const updates = stored.map((u, i) => ({
    worker: u.worker,
    samples: metas[i]!.samples,
    weights:
      (known.has(u.worker) ? run.accepted.get(u.worker)?.weights : undefined) ??
      decodeWeights(u.weights, limits),
  }));
  const version = state.version + 1;
  const result = await step(run, state, tensors, updates, metas);
  const next = replaceInitializers(bytes, result.weights);
  if (result.state.kind !== 'none')
    await store.saveStrategyState(version, encodeState(result.state));
  await store.saveModel(version, next);
  // The next round trains from it: kept, not read back and parsed again.
  run.base = { version, bytes: next, tensors: result.weights, strategyState: result.state };
  forgetAccepted(run);
  // The versions an update may still train from after this step: no older one is asked again.
  const oldest = version - (buffered(config)?.maxStaleness ?? 0);
  for (const kept of run.older.keys()) if (kept < oldest) run.older.delete(kept);
  const workers = stored.map((u) => u.worker);
  const report = { ...result.report, epsilon: epsilonOf(run.deps.config, state.round) };
  await commitRound(run, { state, token, claim, workers, metas, model: next, version, report });
}

/** A round's step: the next weights, what the strategy carries on, whom it left out or clipped. */
interface Stepped {
  weights: Map<string, Tensor>;
  state: StrategyState;
  report: Pick<AggregationReport, 'rejected' | 'clipped'>;
}

/** The job's strategy over the round's updates, or FedBuff's step over its buffer. */
async function step(
  run: Run,
  state: Pick<RoundState, 'base' | 'round'>,
  tensors: NamedTensors,
  updates: readonly WeightUpdate[],
  metas: readonly UpdateMeta[],
): Promise<Stepped> {
  const fedbuff = buffered(run.deps.config);
  if (fedbuff !== undefined) return bufferStep(run, fedbuff, state.base, tensors, updates, metas);
  const strategy = await strategyOf(run);
  const carried = await strategyState(run, state.base, tensors.size);
  return combine(strategy, tensors, updates, carried, state.round);
}

/**
 * FedBuff's server step over the buffer: each update's delta from the version it trained from,
 * weighted by its staleness (shared/fl/strategy/fedbuff.ts), applied to the base `version`.
 */
async function bufferStep(
  run: Run,
  fedbuff: Buffered,
  version: number,
  tensors: NamedTensors,
  updates: readonly WeightUpdate[],
  metas: readonly UpdateMeta[],
): Promise<Stepped> {
  const contributions = await Promise.all(
    updates.map(async (update, i) => {
      const from = (metas[i] as Partial<StoredMeta>).base ?? version;
      const start = from === version ? tensors : (await olderModel(run, from)).tensors;
      return {
        worker: update.worker,
        version: from,
        samples: update.samples,
        delta: modelDelta(start, update),
      };
    }),
  );
  const { weights, applied } = bufferedStep({
    base: tensors,
    version,
    buffered: contributions,
    serverLr: fedbuff.eta,
    policy: { kind: 'polynomial', a: fedbuff.stalenessExponent },
    maxStaleness: fedbuff.maxStaleness,
  });
  const stale = applied.filter((a) => a.staleness > 0);
  if (stale.length > 0) run.deps.log.info({ version, stale }, 'stale updates weighted down');
  return { weights, state: initialState, report: { rejected: [], clipped: [] } };
}

/** Commits the averaged round: the next one opens, or the job ends on its stop condition. */
async function commitRound(
  run: Run,
  round: {
    state: RoundState;
    token: string;
    claim: Claimed;
    workers: readonly string[];
    metas: readonly UpdateMeta[];
    model: Uint8Array;
    version: number;
    report: Pick<AggregationReport, 'rejected' | 'clipped'> & { epsilon: number | undefined };
  },
): Promise<void> {
  const { config, store, log } = run.deps;
  const { state, version } = round;
  // The round before's evaluation lands first: the history below holds it.
  await run.evaluating;
  const beside = run.deps.evaluate !== undefined && evaluatesBeside(config, state.round);
  const summary = await summarize(run, round, !beside);
  const earlier = (await store.history()).map((h) => JSON.parse(h) as RoundSummary);
  const stop = stopReason(config, summary, earlier);
  const change = {
    round: state.round,
    token: round.token,
    summary: JSON.stringify(summary),
    version,
    sha: sha256(round.model),
  };
  const committed =
    stop === undefined
      ? await store.commit({ ...change, outcome: 'next', ...nextRound(run, state.round + 1) })
      : await store.commit({ ...change, outcome: 'done', nowMs: run.deps.now(), message: stop });
  if (!committed) return;
  log.info({ ...summary, stop }, 'round committed');
  // FedBuff: the versions an update may still be trained from stay (its delta is taken from it).
  const kept = buffered(config)?.maxStaleness ?? 0;
  await dropStale(run, state.base - 1 - kept, [summary, ...earlier]);
  // Inside tick's close: the new round is told, not closed (it holds no update yet).
  if (stop === undefined) await tellOpenRound(run);
  if (beside) evaluateBeside(run, summary, round.model);
  else announce(run, summary);
}

function announce(run: Run, summary: RoundSummary): void {
  const { log } = run.deps;
  run.deps.announce(summary).catch((err: unknown) => log.warn({ err }, 'round end not announced'));
}

/**
 * Measures a committed round's model while the next round trains, then adds the figures to the
 * round's history entry and announces the round. A failure is logged: the entry stays without
 * them (as it does when an aggregator stops before the evaluation ends; its successor measures
 * the latest model again, evaluateMissed).
 */
function evaluateBeside(run: Run, summary: RoundSummary, model: Uint8Array): void {
  const { evaluate, store, log } = run.deps;
  if (evaluate === undefined) return;
  const { round } = summary;
  run.evaluating = evaluate(model).then(
    async ({ loss, accuracy }) => {
      const add = (entry: string) =>
        JSON.stringify({ ...(JSON.parse(entry) as RoundSummary), loss, accuracy });
      await store.patchHistory(round, add);
      log.info({ round, loss, accuracy }, 'round evaluated');
      announce(run, { ...summary, loss, accuracy });
    },
    (err: unknown) => log.warn({ err, round }, "the round's model could not be evaluated"),
  );
}

/** At start: the latest round's model measured, if its evaluation was lost with a process. */
async function evaluateMissed(run: Run): Promise<void> {
  const { evaluate, store } = run.deps;
  if (evaluate === undefined) return;
  const [latest] = await store.history();
  const summary = latest === undefined ? undefined : (JSON.parse(latest) as RoundSummary);
  if (summary === undefined || summary.accuracy !== undefined) return;
  const model = await store.model(summary.version);
  if (model !== undefined) evaluateBeside(run, summary, model);
}

/** Drops a model version no round trains from any more, unless it is the most accurate yet. */
async function dropStale(run: Run, version: number, history: readonly RoundSummary[]) {
  if (version < 0) return;
  const best = [...history].sort((a, b) => (b.accuracy ?? -1) - (a.accuracy ?? -1))[0];
  if (best?.accuracy !== undefined && best.version === version) return;
  await run.deps.store.dropModel(version);
}

async function summarize(
  run: Run,
  round: {
    state: RoundState;
    claim: Claimed;
    workers: readonly string[];
    metas: readonly UpdateMeta[];
    model: Uint8Array;
    version: number;
    report: Pick<AggregationReport, 'rejected' | 'clipped'> & { epsilon: number | undefined };
  },
  evaluateNow: boolean,
): Promise<RoundSummary> {
  const { state, workers, metas, model, report } = round;
  const trainMs = metas.map((m) => m.trainMs).filter((t): t is number => t !== undefined);
  const evaluated = evaluateNow ? await run.deps.evaluate?.(model) : undefined;
  // Evaluated beside the next round: its loss comes with its accuracy, not the trainers'.
  const loss = evaluateNow ? (evaluated?.loss ?? reportedLoss(metas)) : undefined;
  return {
    round: state.round,
    version: round.version,
    participants: workers.length,
    // A FedBuff step waits for nobody: the trainers not in it are training, not late.
    stragglers:
      buffered(run.deps.config) === undefined
        ? state.selected.filter((w) => !workers.includes(w))
        : [],
    closedBy: round.claim.closedBy,
    durationMs: run.deps.now() - state.openedMs,
    ...(trainMs.length === 0 ? {} : { slowestTrainMs: Math.max(...trainMs) }),
    ...(loss === undefined ? {} : { loss }),
    ...(evaluated === undefined ? {} : { accuracy: evaluated.accuracy }),
    ...(report.rejected.length === 0 ? {} : { rejected: [...report.rejected] }),
    ...(report.clipped.length === 0 ? {} : { clipped: [...report.clipped] }),
    ...(report.epsilon === undefined ? {} : { epsilon: report.epsilon }),
  };
}

/** Round `round` as commit.lua (or open.lua) opens it. */
function nextRound(run: Run, round: number) {
  const now = run.deps.now();
  const { config } = run.deps;
  return { ...selection(config, round), nowMs: now, deadlineMs: now + config.round.timeoutMs };
}

/** Nobody answered by the deadline: the same round again, its trainers told again. */
async function retry(run: Run, state: RoundState, token: string): Promise<void> {
  const round = { round: state.round, token, outcome: 'retry' } as const;
  if (!(await run.deps.store.commit({ ...round, ...nextRound(run, state.round) }))) return;
  run.deps.log.warn({ round: state.round }, 'no update by the deadline: the round opens again');
  await tellOpenRound(run);
}

async function roundView(run: Run): Promise<RoundView> {
  const { config, store } = run.deps;
  const state = await store.state();
  if (state === undefined) throw new JobNotStartedError('the job has not started yet');
  return {
    job: config.job,
    round: state.round,
    base: state.base,
    status: state.status,
    selected: state.selected,
    submitted: await store.submitted(),
    deadline: new Date(state.deadlineMs).toISOString(),
    // The latest version: the one the open round trains from, or the job's last once it ended.
    model: { url: modelUrl(run, state.version), sha256: state.sha },
    training: config.training,
    ...staleness(config),
  };
}

function createAggregator(deps: AggregatorDeps): Aggregator {
  const run: Run = { deps, accepted: new Map(), older: new Map() };
  return {
    start: () => start(run),
    offer: (update) => offer(run, update),
    async reportFailure(failure) {
      await deps.store.recordFailure(failure.worker, {
        atMs: deps.now(),
        round: failure.round ?? 0,
        exitCode: failure.exitCode,
        message: failure.message,
      });
    },
    round: () => roundView(run),
    // The version the open round trains from is asked for by every trainer: served as held.
    async model(version) {
      const held = run.base?.version === version ? run.base.bytes : undefined;
      if (held === undefined) return deps.store.model(version);
      return Buffer.from(held.buffer, held.byteOffset, held.byteLength);
    },
    tick: () => tick(run),
    close() {
      run.cancelTimer?.();
    },
  };
}

export { JobNotStartedError, createAggregator };
export type { Aggregator, AggregatorDeps, RoundView };
