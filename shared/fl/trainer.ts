/**
 * fl-trainer's rounds. A round event (or, at start-up, an open round the trainer missed) starts
 * one: take the model the event carried (or download it from the aggregator), have it trained
 * on this node's Dataset (round-compute.ts, on a thread of its own in an image), send the
 * weights as an update. The
 * round's request is answered only when that is done, so Knative keeps the trainer up while it
 * trains; a second event for the round in flight is answered at once. Nothing is kept from one
 * round to the next (the trainer may scale to zero between them).
 *
 * Calls that fail for a while (the aggregator or its model unreachable, a 5xx) are retried with
 * capped exponential backoff until the round's deadline. A round that cannot be trained is
 * reported to the aggregator with an exit code its restart policy judges (round-compute.ts exitCodes);
 * no message carries weights or training data.
 */
import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { ExponentialBackoff } from 'cockatiel';
import type { IBackoff, IBackoffFactory } from 'cockatiel';
import { ConflictError, PayloadTooLargeError, ValidationError } from '../errors/index.js';
import { roundStarted } from '../messages/federated.js';
import type { RoundStarted } from '../messages/federated.js';
import { parseInput } from '../schema/index.js';
import type { Logger } from '../telemetry/index.js';
import {
  AggregatorRejectedError,
  AggregatorUnavailableError,
  ModelDigestError,
  sameOrigin,
} from './client.js';
import type { RoundStatus, TrainerClient } from './client.js';
import { RoundFailure, exitCodes } from './round-compute.js';
import type { LocalTraining, Trained } from './round-compute.js';
import type { TrainerConfig } from './trainer-config.js';

/** How a round ended, as its request is answered. */
interface RoundResult {
  round: number;
  outcome: 'sent' | 'refused' | 'failed';
  samples: number;
  loss: number;
  trainMs: number;
  reason?: string;
}

type RoundAnswer =
  { kind: 'done'; result: RoundResult } | { kind: 'already-training'; round: number };

interface Trainer {
  /**
   * Trains `event`'s round (from `model` when the event carried it, checked against its sha256;
   * else downloaded) and answers when done, or at once when that round is in flight.
   * ValidationError: an event for another job, or a model URL off the aggregator's origin;
   * ConflictError: a round older than the one in flight.
   */
  onRound(event: RoundStarted, model?: Uint8Array): Promise<RoundAnswer>;
  /** Asks the aggregator (retrying until it answers) for an open round this trainer missed. */
  startupPoll(signal: AbortSignal): Promise<void>;
}

interface Backoff {
  initialMs: number;
  maxMs: number;
}

interface TrainerDeps {
  config: Pick<TrainerConfig, 'job' | 'worker' | 'aggregatorUrl' | 'token' | 'maxModelBytes'>;
  client: TrainerClient;
  /** Where a round's model is trained (round-compute.ts, training-thread.ts). */
  training: LocalTraining;
  log: Logger;
  /** Milliseconds since the epoch (default Date.now). */
  now?: () => number;
  /** Waits `ms`, rejecting when `signal` aborts (default: a timer). */
  delay?: (ms: number, signal: AbortSignal) => Promise<void>;
  /** Retries within a round (default 250 ms doubling to 15 s). */
  retry?: Backoff;
  /** The start-up poll (default 500 ms doubling to 30 s). */
  poll?: Backoff;
}

/** The dependencies with their defaults filled in. */
type Parts = Required<Omit<TrainerDeps, 'retry' | 'poll'>> & {
  retry: IBackoffFactory<unknown>;
  poll: IBackoffFactory<unknown>;
};

/** One round in flight: its event, the model if it came with it, deadline (ms), cancel signal. */
interface Round {
  readonly event: RoundStarted;
  readonly model: Uint8Array | undefined;
  readonly deadline: number;
  readonly signal: AbortSignal;
}

const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

const messageOf = (err: unknown) => (err instanceof Error ? err.message : String(err));

const backoff = (b: Backoff) =>
  new ExponentialBackoff({ initialDelay: b.initialMs, maxDelay: b.maxMs });

/**
 * `call` until it returns, retrying AggregatorUnavailableError with backoff until the round's
 * deadline (a RoundFailure with the transient exit code then). Other errors go through.
 */
async function retrying<T>(
  parts: Parts,
  round: Round,
  what: string,
  call: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  let step: IBackoff<unknown> | undefined;
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await call(round.signal);
    } catch (err) {
      if (!(err instanceof AggregatorUnavailableError) || round.signal.aborted) throw err;
      step = (step ?? parts.retry).next(undefined);
      const wait = Math.min(step.duration, round.deadline - parts.now());
      if (wait <= 0) {
        throw new RoundFailure(
          exitCodes.transient,
          `${err.message}; gave up at the round's deadline after ${attempt} attempts`,
        );
      }
      parts.log.warn(
        { round: round.event.round, attempt, retryInMs: Math.round(wait), reason: err.message },
        `${what} failed; retrying`,
      );
      await parts.delay(wait, round.signal);
    }
  }
}

/** What a round answers, from how far it got. */
function result(
  round: number,
  outcome: RoundResult['outcome'],
  trained: Trained | undefined,
  reason?: string,
): RoundResult {
  const loss = trained?.loss ?? 0;
  return {
    round,
    outcome,
    samples: trained?.samples ?? 0,
    loss: Number.isFinite(loss) ? loss : 0,
    trainMs: Math.round(trained?.trainMs ?? 0),
    ...(reason === undefined ? {} : { reason }),
  };
}

/** Any error of a round as the failure it is reported with. */
function asFailure(err: unknown): RoundFailure {
  if (err instanceof RoundFailure) return err;
  if (err instanceof AggregatorUnavailableError || err instanceof ModelDigestError) {
    return new RoundFailure(exitCodes.transient, err.message);
  }
  if (err instanceof AggregatorRejectedError)
    return new RoundFailure(exitCodes.rejected, err.message);
  // Only the model download has a size limit the client enforces.
  if (err instanceof PayloadTooLargeError) return new RoundFailure(exitCodes.model, err.message);
  return new RoundFailure(exitCodes.rejected, `unexpected: ${messageOf(err)}`);
}

/** Reports `failure` to the aggregator; a report that fails is logged, not retried. */
async function report(parts: Parts, round: number, failure: RoundFailure): Promise<void> {
  const { config, client, log } = parts;
  try {
    await client.reportFailure({
      job: config.job,
      worker: config.worker,
      round,
      exitCode: failure.exitCode,
      message: failure.message.slice(0, 1024),
    });
  } catch (err) {
    log.warn({ round, reason: messageOf(err) }, 'the failure could not be reported');
  }
}

/** Ends a round that threw: superseded (refused), else reported as a failure. */
async function ended(
  parts: Parts,
  round: Round,
  err: unknown,
  trained: Trained | undefined,
): Promise<RoundResult> {
  const n = round.event.round;
  if (round.signal.aborted) {
    const reason = `superseded: ${messageOf(round.signal.reason)}`;
    parts.log.warn({ round: n, reason }, 'round abandoned');
    return result(n, 'refused', trained, reason);
  }
  const failure = asFailure(err);
  parts.log.error(
    { round: n, exitCode: failure.exitCode, reason: failure.message },
    'round failed',
  );
  await report(parts, n, failure);
  return result(n, 'failed', trained, failure.message);
}

/** Sends the trained weights (retried until the deadline) and says how the aggregator took them. */
async function sendUpdate(parts: Parts, round: Round, trained: Trained): Promise<RoundResult> {
  const { event } = round;
  if (round.signal.aborted) throw round.signal.reason;
  const sent = await retrying(parts, round, 'update', (signal) =>
    parts.client.sendUpdate(
      {
        round: event.round,
        base: event.base,
        samples: trained.samples,
        loss: trained.loss,
        trainMs: trained.trainMs,
        weights: trained.encoded,
      },
      signal,
    ),
  );
  const facts = { round: event.round, samples: trained.samples, loss: trained.loss };
  if (sent.outcome === 'refused') {
    parts.log.warn({ ...facts, reason: sent.reason }, 'update refused by the aggregator');
    return result(event.round, 'refused', trained, sent.reason);
  }
  parts.log.info(
    { ...facts, trainMs: Math.round(trained.trainMs), sent: sent.outcome },
    'update sent',
  );
  return result(event.round, 'sent', trained);
}

/** The round's model: the one it carried when its digest is right, else downloaded. */
async function roundModel(parts: Parts, round: Round): Promise<Uint8Array> {
  const { model: source } = round.event;
  if (round.model !== undefined && sha256(round.model) === source.sha256) return round.model;
  if (round.model !== undefined)
    parts.log.warn(
      { round: round.event.round },
      'the carried model is not the sha256 named; downloading it',
    );
  return retrying(parts, round, 'model download', (signal) =>
    parts.client.fetchModel(source.url, source.sha256, parts.config.maxModelBytes, signal),
  );
}

/** One round, start to end; never throws. */
async function runRound(parts: Parts, round: Round): Promise<RoundResult> {
  const { event } = round;
  if (parts.now() >= round.deadline) {
    const reason = `late: the round's deadline ${event.deadline} passed before training started`;
    parts.log.warn({ round: event.round, reason }, 'round not trained');
    return result(event.round, 'refused', undefined, reason);
  }
  parts.log.info({ round: event.round, base: event.base }, 'round started');
  let trained: Trained | undefined;
  try {
    const model = await roundModel(parts, round);
    trained = await parts.training.run(model, event.training, round.signal);
    return await sendUpdate(parts, round, trained);
  } catch (err) {
    return ended(parts, round, err, trained);
  } finally {
    // Sent or given up: its memory may take a later round's update.
    if (trained !== undefined) parts.training.release(trained);
  }
}

/** Refuses (ValidationError, 400) a round for another job or a model from elsewhere. */
function checkEvent(config: Parts['config'], event: RoundStarted): void {
  if (event.job !== config.job) {
    throw new ValidationError(`data.job: ${event.job} is not this trainer's job ${config.job}`);
  }
  if (!sameOrigin(event.model.url, config.aggregatorUrl)) {
    throw new ValidationError(
      `data.model.url: ${event.model.url} is not on the aggregator's origin ${new URL(config.aggregatorUrl).origin}`,
    );
  }
}

/** The round the aggregator says is open, as its event, if this trainer should train it. */
function missedRound(parts: Parts, state: RoundStatus): RoundStarted | undefined {
  const { config, log } = parts;
  const facts = { round: state.round, status: state.status };
  if (state.job !== config.job) {
    log.error({ ...facts, job: state.job }, 'the aggregator runs another job');
    return undefined;
  }
  const pending =
    state.status === 'open' &&
    state.selected.includes(config.worker) &&
    !state.submitted.includes(config.worker);
  if (!pending) {
    log.info(facts, 'no missed round to train');
    return undefined;
  }
  const { job, round, base, model, training, deadline, maxStaleness } = state;
  const event = { job, round, base, model, training, deadline, maxStaleness };
  return parseInput(roundStarted, event, 'round status');
}

/** Asks for the current round until the aggregator answers (never gives up but on `signal`). */
async function pollRound(parts: Parts, signal: AbortSignal): Promise<RoundStatus | undefined> {
  let step: IBackoff<unknown> | undefined;
  for (let attempt = 1; !signal.aborted; attempt += 1) {
    try {
      return await parts.client.currentRound(signal);
    } catch (err) {
      if (signal.aborted) return undefined;
      if (!(err instanceof AggregatorUnavailableError)) throw err;
      step = (step ?? parts.poll).next(undefined);
      parts.log.info(
        { attempt, retryInMs: Math.round(step.duration), reason: err.message },
        'the aggregator is not answering yet; asking again',
      );
      try {
        await parts.delay(step.duration, signal);
      } catch {
        return undefined;
      }
    }
  }
  return undefined;
}

/**
 * Whether an update trained from version `base` still counts in `event`'s asynchronous (FedBuff)
 * round: no more than its maxStaleness versions behind. Synchronous rounds: never.
 */
function stillCounts(base: number, event: RoundStarted): boolean {
  const { maxStaleness } = event;
  return maxStaleness !== undefined && event.base >= base && event.base - base <= maxStaleness;
}

/** Builds a trainer; logs a warning when updates would carry no credentials. */
function createTrainer(deps: TrainerDeps): Trainer {
  const parts: Parts = {
    ...deps,
    now: deps.now ?? Date.now,
    delay: deps.delay ?? ((ms, signal) => sleep(ms, undefined, { signal })),
    retry: backoff(deps.retry ?? { initialMs: 250, maxMs: 15_000 }),
    poll: backoff(deps.poll ?? { initialMs: 500, maxMs: 30_000 }),
  };
  if (deps.config.token === undefined) {
    deps.log.warn(
      'EDGEAI_NODE_TOKEN is not set: updates carry no credentials and the aggregator will refuse them',
    );
  }
  let current: { round: number; base: number; abort: AbortController } | undefined;

  async function onRound(event: RoundStarted, model?: Uint8Array): Promise<RoundAnswer> {
    checkEvent(parts.config, event);
    if (current !== undefined) {
      if (current.round === event.round) return { kind: 'already-training', round: event.round };
      // Asynchronous rounds: the update in training still counts; it is not thrown away.
      if (stillCounts(current.base, event))
        return { kind: 'already-training', round: current.round };
      if (current.round > event.round) {
        throw new ConflictError(
          `round ${event.round} is older than round ${current.round}, which this trainer is training`,
        );
      }
      current.abort.abort(new Error(`round ${event.round} started`));
    }
    const mine = { round: event.round, base: event.base, abort: new AbortController() };
    current = mine;
    const deadline = Date.parse(event.deadline);
    try {
      const done = await runRound(parts, { event, model, deadline, signal: mine.abort.signal });
      return { kind: 'done', result: done };
    } finally {
      if (current === mine) current = undefined;
    }
  }

  async function startupPoll(signal: AbortSignal): Promise<void> {
    // Read the Dataset while waiting, so the first round does not parse it; a Dataset that
    // cannot be read fails its round, reported then.
    parts.training.prefetch();
    try {
      const state = await pollRound(parts, signal);
      const missed = state === undefined ? undefined : missedRound(parts, state);
      if (missed === undefined || signal.aborted) return;
      parts.log.info({ round: missed.round }, 'training the open round this trainer missed');
      await onRound(missed);
    } catch (err) {
      parts.log.error({ reason: messageOf(err) }, 'start-up poll stopped');
    }
  }

  return { onRound, startupPoll };
}

export { createTrainer };
export type { Trainer, RoundResult, RoundAnswer };
