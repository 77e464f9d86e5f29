/**
 * reconcile-tick as a function: the PingSource tick reconciles every service; an ApiServerSource
 * event (a service, or a worker Service it owns) reconciles one.
 */
import { z } from 'zod';
import { eventTypes } from '../events/index.js';
import { defineFunction, onEvent, onRequest } from '../http/index.js';
import type { FunctionDefinition, ReadinessCheck } from '../http/index.js';
import type { Reconciler } from './reconciler.js';
import { kubeObjectData, targetOf } from './source-events.js';

function reconcileTickDefinition(deps: {
  reconciler: Reconciler;
  readiness: readonly ReadinessCheck[];
}): FunctionDefinition {
  const { reconciler } = deps;
  const onObject = (type: string) =>
    onEvent({
      type,
      data: kubeObjectData,
      async handle({ data }) {
        const target = targetOf(data);
        if (target?.kind === 'service')
          await reconciler.reconcileService(target.namespace, target.name);
        if (target?.kind === 'model')
          await reconciler.reconcileUsers(target.namespace, target.model);
        return { kind: 'accepted' };
      },
    });
  return defineFunction({
    name: 'reconcile-tick',
    events: [
      onEvent({
        type: eventTypes.pingTick,
        data: z.unknown(),
        async handle() {
          await reconciler.tick();
          return { kind: 'accepted' };
        },
      }),
      onObject(eventTypes.apiServerAdd),
      onObject(eventTypes.apiServerUpdate),
      // A deleted service's workers go by garbage collection; a deleted worker is recreated.
      onObject(eventTypes.apiServerDelete),
    ],
    routes: [
      onRequest({
        method: 'POST',
        path: '/tick',
        async handle() {
          return { kind: 'json', body: await reconciler.tick() };
        },
      }),
    ],
    readiness: deps.readiness,
  });
}

export { reconcileTickDefinition };
