/**
 * reconcile-tick as a function: the PingSource tick reconciles every resource of every kind the
 * engine has registered; an ApiServerSource event (one of those resources, a Knative Service one
 * of them owns, or a Model) reconciles the resources it concerns.
 */
import { z } from 'zod';
import { ValidationError } from '../errors/index.js';
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
      onEvent({
        type: eventTypes.flRoundCompleted,
        data: z.unknown(),
        async handle({ event }) {
          // A federated job's aggregator says a round ended: its status shows it now, not at
          // the next tick. The subject names the job.
          const [namespace, name, ...rest] = (event.subject ?? '').split('/');
          if (
            namespace === undefined ||
            name === undefined ||
            namespace === '' ||
            name === '' ||
            rest.length > 0
          )
            throw new ValidationError(`subject: "${event.subject ?? ''}" is not <namespace>/<job>`);
          if (controller.kinds.includes('federatedLearningJob'))
            await controller.reconcile('federatedLearningJob', namespace, name);
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
