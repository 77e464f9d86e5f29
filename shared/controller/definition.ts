/**
 * reconcile-tick as a function: the PingSource tick reconciles every resource of every kind the
 * engine has registered; an ApiServerSource event (one of those resources, a Knative Service one
 * of them owns, or a Model) reconciles the resources it concerns.
 */
import { z } from 'zod';
import { eventTypes } from '../events/index.js';
import { defineFunction, onEvent, onRequest } from '../http/index.js';
import type { FunctionDefinition, ReadinessCheck } from '../http/index.js';
import type { Controller } from './engine.js';
import { kubeObjectData, targetOf } from './source-events.js';

function reconcileTickDefinition(deps: {
  controller: Controller;
  readiness: readonly ReadinessCheck[];
}): FunctionDefinition {
  const { controller } = deps;
  const onObject = (type: string) =>
    onEvent({
      type,
      data: kubeObjectData,
      async handle({ data }) {
        const target = targetOf(data);
        if (target?.kind === 'users')
          await controller.reconcileUsers(target.of, target.namespace, target.name);
        // A kind not registered (e.g. MLGraph without its controller) is accepted and ignored.
        if (target?.kind === 'owner' && controller.kinds.includes(target.owner))
          await controller.reconcile(target.owner, target.namespace, target.name);
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
          await controller.tick();
          return { kind: 'accepted' };
        },
      }),
      onObject(eventTypes.apiServerAdd),
      onObject(eventTypes.apiServerUpdate),
      // A deleted resource's Services go by garbage collection; a deleted Service is recreated.
      onObject(eventTypes.apiServerDelete),
    ],
    routes: [
      onRequest({
        method: 'POST',
        path: '/tick',
        async handle() {
          return { kind: 'json', body: await controller.tick() };
        },
      }),
    ],
    readiness: deps.readiness,
  });
}

export { reconcileTickDefinition };
