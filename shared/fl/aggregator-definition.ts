/**
 * fl-aggregator as a function. Trainers send their updates as binary-mode CloudEvents (the
 * weights are the data, what they are the extensions: shared/messages/federated.ts) and their
 * failures as JSON ones, each signed with their node's token; the PingSource tick closes a round
 * that is due. Plain HTTP: GET /v1/round (what a trainer that missed its round event needs),
 * GET /v1/models/<version> (the models the job made: round inputs, and the Model it publishes).
 *
 * Answers to an update: 202 accepted, 200 already counted (a resend), 409 refused with the
 * reason (late, closed, stale-base, not-selected, finished, future), 400/401/403/413 as usual.
 * An asynchronous (FedBuff) job's update that comes while its buffer is being stepped is a 503
 * with Retry-After instead: sent again, it joins the next buffer (one version staler), where a
 * synchronous round's would be too late for good.
 */
import { z } from 'zod';
import { ForbiddenError, ValidationError, errorAnswer } from '../errors/index.js';
import { eventTypes } from '../events/index.js';
import { defineFunction, onEvent, onRequest } from '../http/index.js';
import type { Answer, FunctionDefinition, ReadinessCheck } from '../http/index.js';
import type { FlJobConfig } from '../messages/federated.js';
import { flUpdateAttributes, trainerFailed } from '../messages/federated.js';
import { parseInput } from '../schema/index.js';
// node-auth alone: the status index would bring the controller into this function's bundle.
import { authenticateBearer } from '../status/node-auth.js';
import type { NodeTokens } from '../status/node-auth.js';
import { JobNotStartedError } from './aggregator.js';
import type { Aggregator } from './aggregator.js';
import type { OfferOutcome } from './round-store.js';

interface AggregatorDefinitionDeps {
  config: FlJobConfig;
  aggregator: Aggregator;
  /** Each trainer's node token, by trainer name. */
  tokens: ReadonlyMap<string, Buffer>;
  maxUpdateBytes: number;
  readiness: readonly ReadinessCheck[];
}

type Headers = Readonly<Record<string, string | string[] | undefined>>;

/**
 * The trainer named `worker`, once the request proves it comes from that trainer's node: a
 * valid token for another node is a 403, not a way to send another trainer's updates.
 */
async function authenticate(
  deps: AggregatorDefinitionDeps,
  headers: Headers,
  worker: string,
): Promise<void> {
  const trainer = deps.config.trainers.find((t) => t.name === worker);
  if (trainer === undefined)
    throw new ForbiddenError(`trainer ${worker} is not in job ${deps.config.job}`);
  const tokens: NodeTokens = {
    token: (node) => Promise.resolve(node === trainer.node ? deps.tokens.get(worker) : undefined),
  };
  const node = await authenticateBearer(tokens, headers).catch((err: unknown) => {
    throw err instanceof Error && /token not accepted/.test(err.message)
      ? new ForbiddenError(`trainer ${worker} runs on node ${trainer.node}: ${err.message}`)
      : err;
  });
  if (node !== trainer.node)
    throw new ForbiddenError(`trainer ${worker} runs on node ${trainer.node}, not ${node}`);
}

function answerOffer(outcome: OfferOutcome, asynchronous: boolean): Answer {
  if (outcome.kind === 'accepted') return { kind: 'accepted' };
  if (outcome.kind === 'duplicate')
    return { kind: 'json', status: 200, body: { outcome: 'duplicate', updates: outcome.n } };
  if (outcome.reason === 'closed' && asynchronous) {
    const message = 'the buffer is being stepped: send the update again, it joins the next one';
    return {
      kind: 'json',
      status: 503,
      headers: { 'retry-after': '1' },
      body: { error: { status: 503, reason: 'closed', message } },
    };
  }
  const messages: Record<typeof outcome.reason, string> = {
    'unknown-job': 'the job has not started',
    finished: `the job has ended (${outcome.detail})`,
    late: `round ${outcome.detail} is open now`,
    future: `round ${outcome.detail} is open, not that one yet`,
    closed: 'the round is being aggregated: it takes no more updates',
    'stale-base': `the round trains from model version ${outcome.detail}`,
    'not-selected': 'this round did not select this trainer',
    buffered: "this trainer's update is already in the open buffer: one per trainer a step",
  };
  return {
    kind: 'json',
    status: 409,
    body: { error: { status: 409, reason: outcome.reason, message: messages[outcome.reason] } },
  };
}

function updateRoute(deps: AggregatorDefinitionDeps) {
  return onEvent({
    type: eventTypes.flUpdate,
    data: z.instanceof(Uint8Array).optional(),
    async handle({ data, event }, ctx) {
      const attrs = parseInput(flUpdateAttributes, event.extensions, 'extensions');
      if (attrs.fljob !== deps.config.job)
        throw new ValidationError(
          `fljob: this aggregator runs ${deps.config.job}, not ${attrs.fljob}`,
        );
      await authenticate(deps, ctx.headers, attrs.flworker);
      if (data === undefined || data.length === 0)
        throw new ValidationError('data: the update carries no weights');
      const weights = data;
      const outcome = await deps.aggregator.offer({
        worker: attrs.flworker,
        round: attrs.flround,
        base: attrs.flbase,
        meta: {
          samples: attrs.flsamples,
          ...(attrs.flloss === undefined ? {} : { loss: attrs.flloss }),
          ...(attrs.fltrainms === undefined ? {} : { trainMs: attrs.fltrainms }),
        },
        weights,
      });
      ctx.log.info(
        { worker: attrs.flworker, round: attrs.flround, outcome: outcome.kind },
        'update',
      );
      return answerOffer(outcome, deps.config.aggregation.kind === 'fedbuff');
    },
  });
}

/**
 * The open round, as GET /v1/round and a tick answer it. Before the job's first round opens, a
 * 503 with Retry-After, answered rather than thrown: trainers that start first ask until it
 * opens (shared/fl/trainer.ts startupPoll), an expected state and not a failure, which would be
 * logged with its stack at every poll.
 */
async function roundAnswer(aggregator: Aggregator): Promise<Answer> {
  try {
    return { kind: 'json', body: await aggregator.round() };
  } catch (err) {
    if (!(err instanceof JobNotStartedError)) throw err;
    const { status, headers, body } = errorAnswer(err);
    return { kind: 'json', status, headers, body };
  }
}

function flAggregatorDefinition(deps: AggregatorDefinitionDeps): FunctionDefinition {
  const { aggregator } = deps;
  return defineFunction({
    name: 'fl-aggregator',
    // An update is read into memory reused from update to update (handed back by the aggregator
    // once its round's step is done), not a new buffer each: on the machines measured, first
    // touching new memory cost more than the copy itself.
    alignBodyAt: (headers) => (headers['ce-type'] === eventTypes.flUpdate ? 0 : undefined),
    events: [
      updateRoute(deps),
      onEvent({
        type: eventTypes.flTrainerFailed,
        data: trainerFailed,
        async handle({ data }, ctx) {
          if (data.job !== deps.config.job)
            throw new ValidationError(`data.job: this aggregator runs ${deps.config.job}`);
          await authenticate(deps, ctx.headers, data.worker);
          await aggregator.reportFailure(data);
          return { kind: 'accepted' };
        },
      }),
      onEvent({
        type: eventTypes.pingTick,
        data: z.unknown(),
        async handle() {
          await aggregator.tick();
          return { kind: 'accepted' };
        },
      }),
    ],
    routes: [
      onRequest({
        method: 'GET',
        path: '/v1/round',
        handle: () => roundAnswer(aggregator),
      }),
      onRequest({
        method: 'GET',
        path: '/v1/models/:version',
        params: z.object({ version: z.coerce.number().int().min(0) }),
        async handle({ params }) {
          const bytes = await aggregator.model(params.version);
          if (bytes === undefined)
            return {
              kind: 'json',
              status: 404,
              body: {
                error: {
                  status: 404,
                  reason: 'NotFound',
                  message: `model version ${params.version} is not kept`,
                },
              },
            };
          return { kind: 'bytes', contentType: 'application/octet-stream', body: bytes };
        },
      }),
      onRequest({
        method: 'POST',
        path: '/tick',
        async handle() {
          await aggregator.tick();
          return roundAnswer(aggregator);
        },
      }),
    ],
    readiness: deps.readiness,
  });
}

export { flAggregatorDefinition };
