/**
 * The aggregator as a process runs it: the round store on the function's Redis, the initial
 * model and the evaluation Dataset read from where the job says, trainers told over HTTP (a
 * CloudEvent each), the end of a round announced to the Broker, real timers, and a start that
 * keeps trying (Redis or the model not there yet) while readiness says so.
 */
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { UnavailableError } from '../errors/index.js';
import { SinkRefusedError, createEventSink, eventTypes } from '../events/index.js';
import type { SinkPost } from '../events/index.js';
import { createHttpClient, releaseBody, sinkPost } from '../http/index.js';
import { loadModelBytes } from '../inference/model-source.js';
import { nodeHeader } from '../messages/worker-message.js';
import type { RedisClient } from '../redis/index.js';
import type { Logger } from '../telemetry/index.js';
import { createAggregator } from './aggregator.js';
import type { Aggregator, AggregatorDeps } from './aggregator.js';
import type { AggregatorConfig } from './aggregator-config.js';
import { collectGarbage } from './collect-garbage.js';
import { readDataset } from './dataset-source.js';
import { localEvaluation } from './evaluation-thread.js';
import { createRoundStore } from './round-store.js';

interface AggregatorRuntime {
  aggregator: Aggregator;
  /** Resolves once the job has started (or resumed); rejects until then. */
  started(): Promise<void>;
  close(): void;
}

/** Real timers, each cancellable, all cleared on close. */
function timerSet() {
  const timers = new Set<NodeJS.Timeout>();
  const schedule = (atMs: number, fn: () => void) => {
    const timer = setTimeout(
      () => {
        timers.delete(timer);
        fn();
      },
      Math.max(0, atMs - Date.now()),
    );
    timers.add(timer);
    return () => {
      clearTimeout(timer);
      timers.delete(timer);
    };
  };
  return { schedule, clear: () => timers.forEach((t) => clearTimeout(t)) };
}

/**
 * How a trainer is told of a round: a binary CloudEvent carrying the model, with the trainer's
 * own node token as credentials (the trainer trusts a pushed model only from the aggregator);
 * a model over the inline limit, or refused as too large (413), goes as a JSON event naming the
 * model to download. The trainer answers when it has trained: the request lasts up to the round's
 * deadline.
 */
function notifier(settings: AggregatorConfig, post: SinkPost): AggregatorDeps['notify'] {
  const { job, tokens, inlineModelBytes } = settings;
  const source = `/fl/${job.job}/aggregator`;
  return async (trainer, event, model) => {
    const token = tokens.get(trainer.name)?.toString();
    const sink = createEventSink({
      url: trainer.url,
      source,
      attempts: 3,
      timeoutMs: job.round.timeoutMs,
      post,
      ...(token === undefined
        ? {}
        : { headers: { authorization: `Bearer ${token}`, [nodeHeader]: trainer.node } }),
    });
    const told = {
      id: `${job.job}.r${event.round}.${trainer.name}`,
      type: eventTypes.flRoundStarted,
    };
    if (token !== undefined && model.length <= inlineModelBytes) {
      try {
        return await sink({
          ...told,
          data: model,
          extensions: { flstarted: JSON.stringify(event) },
        });
      } catch (err) {
        if (!(err instanceof SinkRefusedError && err.status === 413)) throw err;
      }
    }
    await sink({ ...told, data: event });
  };
}

/** How trainers are told and the end of a round announced: CloudEvents over HTTP. */
function messengers(
  settings: AggregatorConfig,
  post: SinkPost,
): Pick<AggregatorDeps, 'notify' | 'announce'> {
  const { job } = settings;
  const source = `/fl/${job.job}/aggregator`;
  const broker =
    settings.eventsUrl === undefined
      ? undefined
      : createEventSink({ url: settings.eventsUrl, source, attempts: 3, post });
  return {
    notify: notifier(settings, post),
    announce: async (summary) =>
      broker?.({
        id: `${job.job}/${job.uid}.r${summary.round}`,
        type: eventTypes.flRoundCompleted,
        subject: job.job,
        data: summary,
      }),
  };
}

async function createAggregatorRuntime(options: {
  settings: AggregatorConfig;
  redis: RedisClient;
  log: Logger;
}): Promise<AggregatorRuntime> {
  const { settings, redis, log } = options;
  const { job } = settings;
  const timers = timerSet();
  const http = createHttpClient();
  const evaluation =
    job.evaluation === undefined
      ? undefined
      : localEvaluation({
          split: await readDataset({ ...job.evaluation, maxBytes: settings.maxDatasetBytes }),
          nice: settings.evaluationNice,
          log,
        });
  const aggregator = createAggregator({
    config: job,
    store: createRoundStore(redis, `${job.job}/${job.uid}`),
    initialModel: () =>
      loadModelBytes({
        url: job.initialModel.url,
        sha256: job.initialModel.sha256,
        root: settings.modelRoot,
        cacheDir: join(tmpdir(), 'edgeai-models'),
        maxBytes: settings.maxModelBytes,
        timeoutMs: 60_000,
      }),
    ...(evaluation === undefined ? {} : { evaluate: evaluation.evaluate }),
    ...messengers(settings, sinkPost(http.send)),
    now: Date.now,
    schedule: timers.schedule,
    settle: collectGarbage,
    log,
    leaseMs: settings.leaseMs,
    maxUpdateBytes: settings.maxUpdateBytes,
    // Updates are read into shared/http's reused blocks (aggregator-definition.ts): back to them.
    release: releaseBody,
  });
  let started = false;
  const start = (): void => {
    aggregator.start().then(
      () => {
        started = true;
      },
      (err: unknown) => {
        // Redis still connecting is the usual cause at start: said in one line, tried again soon.
        const unavailable = err instanceof UnavailableError;
        if (unavailable) log.warn({ reason: err.message }, 'the job waits for Redis; trying again');
        else log.error({ err }, 'the job could not start; trying again in 5 s');
        timers.schedule(Date.now() + (unavailable ? 500 : 5000), start);
      },
    );
  };
  start();
  return {
    aggregator,
    started: () => (started ? Promise.resolve() : Promise.reject(new Error('not started yet'))),
    close() {
      aggregator.close();
      timers.clear();
      http.close();
      void evaluation?.close();
    },
  };
}

export { createAggregatorRuntime, notifier };
