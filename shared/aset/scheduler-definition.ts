/**
 * aset-scheduler as a function: streams ask for a binding and end over HTTP or as CloudEvents,
 * the PingSource tick rolls a due window and releases expired leases, and clusters' monitoring
 * agents report delivered responses (the R_w of eq. 11).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import {
  ConflictError,
  ForbiddenError,
  NotFoundError,
  UnauthorizedError,
} from '../errors/index.js';
import { eventTypes } from '../events/index.js';
import { defineFunction, onEvent, onRequest } from '../http/index.js';
import { parseInput } from '../schema/index.js';
import type { FunctionDefinition, ReadinessCheck } from '../http/index.js';
import type { AsetScheduler } from './scheduler.js';
import { responsesReport, streamEnd, streamId, streamRequest } from './stream-request.js';

const idParams = z.object({ id: streamId });

const digest = (value: string) => createHash('sha256').update(value).digest();

/** Checks `Authorization: Bearer <token>` against the configured token in constant time. */
function authorize(expected: Buffer | undefined, header: string | string[] | undefined): void {
  if (expected === undefined) {
    throw new ForbiddenError('response reports over HTTP are disabled: set ASET_REPORT_TOKEN');
  }
  const value = typeof header === 'string' ? header : undefined;
  const match = value === undefined ? null : /^Bearer (\S+)$/.exec(value);
  if (match === null) throw new UnauthorizedError('Authorization: expected "Bearer <token>"');
  if (!timingSafeEqual(digest(match[1]!), expected)) {
    throw new UnauthorizedError('Authorization: the token is not valid');
  }
}

/** A stream's binding over HTTP: ask for one, read it, end it. */
function streamRoutes(scheduler: Pick<AsetScheduler, 'request' | 'find' | 'end'>) {
  return [
    onRequest({
      method: 'POST',
      path: '/v1/streams',
      body: streamRequest,
      async handle({ body }) {
        const outcome = await scheduler.request(body);
        if (outcome.kind === 'rejected') {
          return {
            kind: 'json',
            status: 409,
            body: { error: 'StreamRejected', ...outcome.rejection },
          };
        }
        return {
          kind: 'json',
          status: outcome.replay ? 200 : 201,
          body: outcome.placement,
          headers: { location: `/v1/streams/${encodeURIComponent(body.id)}` },
        };
      },
    }),
    onRequest({
      method: 'GET',
      path: '/v1/streams/:id',
      params: idParams,
      async handle({ params }) {
        return { kind: 'json', body: await scheduler.find(params.id) };
      },
    }),
    onRequest({
      method: 'DELETE',
      path: '/v1/streams/:id',
      params: idParams,
      async handle({ params }) {
        const ended = await scheduler.end(params.id);
        if (ended === undefined) throw new NotFoundError(`stream ${params.id} is not bound`);
        return { kind: 'json', body: ended };
      },
    }),
  ];
}

/** A monitoring agent's delivered responses over HTTP, taken only with the configured token. */
function responsesRoute(deps: {
  scheduler: Pick<AsetScheduler, 'report'>;
  token: Buffer | undefined;
}) {
  const { scheduler, token } = deps;
  return onRequest({
    method: 'POST',
    path: '/v1/responses',
    // Checked after the token, so an unauthenticated caller learns nothing from the schema.
    body: z.unknown(),
    async handle({ body: raw }, ctx) {
      authorize(token, ctx.headers['authorization']);
      const body = parseInput(responsesReport, raw, 'body');
      const applied = await scheduler.report({ source: 'report', id: body.id }, body.reports);
      return { kind: 'json', status: 202, body: { applied } };
    },
  });
}

/** A stream asks for a binding as an event: answered by a bound or a rejected event. */
function streamRequestedEvent(scheduler: Pick<AsetScheduler, 'request'>) {
  return onEvent({
    type: eventTypes.streamRequested,
    data: streamRequest,
    replies: [eventTypes.streamBound, eventTypes.streamRejected],
    async handle({ data }) {
      let outcome: Awaited<ReturnType<AsetScheduler['request']>>;
      try {
        outcome = await scheduler.request(data);
      } catch (error) {
        // An ended stream's id, or one bound with other requirements: Knative retries a 409,
        // and retrying cannot help, so the requester gets a rejection saying why.
        if (!(error instanceof ConflictError)) throw error;
        return {
          kind: 'reply',
          event: {
            type: eventTypes.streamRejected,
            subject: data.id,
            data: { id: data.id, reasons: null, message: error.message },
          },
        };
      }
      return outcome.kind === 'bound'
        ? {
            kind: 'reply',
            event: { type: eventTypes.streamBound, subject: data.id, data: outcome.placement },
          }
        : {
            kind: 'reply',
            event: {
              type: eventTypes.streamRejected,
              subject: data.id,
              data: outcome.rejection,
            },
          };
    },
  });
}

/** Delivered responses as an event: taken only while no token is configured. */
function responsesReportedEvent(deps: {
  scheduler: Pick<AsetScheduler, 'report'>;
  token: Buffer | undefined;
}) {
  const { scheduler, token } = deps;
  return onEvent({
    type: eventTypes.workerResponsesReported,
    data: responsesReport,
    async handle({ data }) {
      // Events carry no token: with one configured, reports come over HTTP only, or anyone
      // who can post to the Broker could steer the meta-policy's view of the clusters.
      if (token !== undefined) {
        throw new ForbiddenError(
          'response reports as events are refused while ASET_REPORT_TOKEN is set: POST /v1/responses with the token',
        );
      }
      // Counted once per report id, whichever form it came in.
      await scheduler.report({ source: 'report', id: data.id }, data.reports);
      return { kind: 'accepted' };
    },
  });
}

function asetSchedulerDefinition(deps: {
  scheduler: AsetScheduler;
  reportToken: string | undefined;
  readiness: readonly ReadinessCheck[];
}): FunctionDefinition {
  const { scheduler } = deps;
  const token = deps.reportToken === undefined ? undefined : digest(deps.reportToken);
  return defineFunction({
    name: 'aset-scheduler',
    routes: [
      ...streamRoutes(scheduler),
      responsesRoute({ scheduler, token }),
      onRequest({
        method: 'GET',
        path: '/v1/scheduler',
        async handle() {
          return { kind: 'json', body: await scheduler.status() };
        },
      }),
    ],
    events: [
      streamRequestedEvent(scheduler),
      onEvent({
        type: eventTypes.streamEnded,
        data: streamEnd,
        async handle({ data }) {
          // Ending a stream that has no binding (ended before, or rejected) changes nothing.
          await scheduler.end(data.id);
          return { kind: 'accepted' };
        },
      }),
      responsesReportedEvent({ scheduler, token }),
      onEvent({
        type: eventTypes.pingTick,
        data: z.unknown(),
        async handle() {
          await scheduler.tick();
          return { kind: 'accepted' };
        },
      }),
    ],
    readiness: deps.readiness,
  });
}

export { asetSchedulerDefinition };
