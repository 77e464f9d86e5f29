/**
 * router as a function: `POST /predict` answers the payload as it came with `mlgraph-route`
 * (the children, comma-separated) and `mlgraph-puid`; `POST /reward` takes `{puid, reward}`.
 * The same as CloudEvents: a predict event is answered by a routed event carrying the payload
 * and the `mlgraphroute` and `mlgraphpuid` extensions.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { NotFoundError } from '../errors/index.js';
import { eventTypes } from '../events/index.js';
import { defineFunction, onEvent, onRequest } from '../http/index.js';
import type { FunctionDefinition, ReadinessCheck } from '../http/index.js';
import { extensions, headers, parseMetadata, puid, reward } from '../messages/mlgraph.js';
import type { Router } from './router.js';

/** An event's prediction id: ids are unique per source only, so both are in it. */
function eventPuid(source: string, id: string): string {
  return `ce-${createHash('sha256').update(`${source.length}:${source}:${id}`).digest('hex').slice(0, 32)}`;
}

function routerDefinition(deps: {
  router: Router;
  readiness: readonly ReadinessCheck[];
  /** An event reward for an unknown or expired prediction (answered 202: retrying cannot help). */
  onUnknownReward?(puid: string): void;
}): FunctionDefinition {
  const { router } = deps;
  return defineFunction({
    name: 'router',
    routes: [
      onRequest({
        method: 'POST',
        path: '/predict',
        body: z.unknown(),
        async handle({ body }, ctx) {
          const given = parseMetadata(puid.optional(), ctx.headers[headers.puid], headers.puid);
          const routed = await router.predict({ puid: given, body });
          return {
            kind: 'json',
            body,
            headers: { [headers.route]: routed.route.join(','), [headers.puid]: routed.puid },
          };
        },
      }),
      onRequest({
        method: 'POST',
        path: '/reward',
        body: reward,
        async handle({ body }) {
          return { kind: 'json', body: { outcome: await router.reward(body.puid, body.reward) } };
        },
      }),
      onRequest({
        method: 'GET',
        path: '/arms',
        async handle() {
          return { kind: 'json', body: await router.arms() };
        },
      }),
    ],
    events: [
      onEvent({
        type: eventTypes.graphPredict,
        data: z.unknown(),
        replies: [eventTypes.graphRouted],
        async handle({ data, event }) {
          // A redelivered event keeps its source and id, hence its prediction id and its route.
          const given =
            parseMetadata(puid.optional(), event.extensions[extensions.puid], extensions.puid) ??
            eventPuid(event.source, event.id);
          const routed = await router.predict({ puid: given, body: data });
          return {
            kind: 'reply',
            event: {
              type: eventTypes.graphRouted,
              data,
              extensions: {
                [extensions.puid]: routed.puid,
                [extensions.route]: routed.route.join(','),
              },
            },
          };
        },
      }),
      onEvent({
        type: eventTypes.graphReward,
        data: reward,
        async handle({ data }) {
          try {
            await router.reward(data.puid, data.reward);
          } catch (error) {
            if (!(error instanceof NotFoundError)) throw error;
            deps.onUnknownReward?.(data.puid);
          }
          return { kind: 'accepted' };
        },
      }),
    ],
    readiness: deps.readiness,
  });
}

export { routerDefinition, eventPuid };
