/**
 * upstream-status as a function: the seed's HTTP report route and the same report as a
 * CloudEvent. Both authenticate the node before anything is read or written.
 */
import { ValidationError } from '../errors/index.js';
import { eventTypes } from '../events/index.js';
import { defineFunction, onEvent, onRequest } from '../http/index.js';
import type { FunctionDefinition, ReadinessCheck } from '../http/index.js';
import {
  parseSubject,
  reportRoute,
  serviceParams,
  workerMessage,
} from '../messages/worker-message.js';
import { authenticateBearer, authenticateSignature } from './node-auth.js';
import type { NodeTokens } from './node-auth.js';
import type { Upstream } from './upstream.js';

function upstreamStatusDefinition(deps: {
  upstream: Upstream;
  tokens: NodeTokens;
  /** How far a signed event's time may be from this server's clock. */
  maxReportAgeMs: number;
  readiness: readonly ReadinessCheck[];
}): FunctionDefinition {
  const { upstream, tokens } = deps;
  return defineFunction({
    name: 'upstream-status',
    routes: [
      onRequest({
        method: 'POST',
        path: reportRoute,
        params: serviceParams,
        body: workerMessage,
        async handle({ params, body }, ctx) {
          const node = await authenticateBearer(tokens, ctx.headers);
          const result = await upstream.report({
            ...params,
            node,
            message: body,
            id: body.id ?? upstream.contentId(node, body),
          });
          return { kind: 'json', body: result };
        },
      }),
    ],
    events: [
      onEvent({
        type: eventTypes.workerStatusReported,
        data: workerMessage,
        async handle({ data, event }) {
          const target = parseSubject(event.subject);
          if (target === undefined) {
            throw new ValidationError(
              'subject: expected "<namespace>/jointinferenceservices/<name>"',
            );
          }
          const node = await authenticateSignature(
            tokens,
            {
              id: event.id,
              subject: event.subject ?? '',
              time: event.time,
              data: event.data,
              extensions: event.extensions,
            },
            { maxAgeMs: deps.maxReportAgeMs },
          );
          // The source is not signed, so the event's id counts per node, whatever the source.
          await upstream.report({ ...target, node, message: data, id: event.id });
          return { kind: 'accepted' };
        },
      }),
    ],
    readiness: deps.readiness,
  });
}

export { upstreamStatusDefinition };
