/**
 * reconcile-tick as a function: the PingSource tick reconciles every service and every MLGraph;
 * an ApiServerSource event (a service, a graph, or a Knative Service one of them owns)
 * reconciles one.
 */
import { z } from 'zod';
import { eventTypes } from '../events/index.js';
import { defineFunction, onEvent, onRequest } from '../http/index.js';
import type { FunctionDefinition, ReadinessCheck } from '../http/index.js';
import type { GraphReconciler } from './graph-reconciler.js';
import type { PassReport, Reconciler } from './reconciler.js';
import { kubeObjectData, targetOf } from './source-events.js';

/**
 * Both passes run whichever fails: a graph the API server refuses must not hold the services up,
 * nor the other way round. The first failure is then thrown, so the tick is redelivered.
 */
async function tickAll(
  reconciler: Reconciler,
  graphs: GraphReconciler | undefined,
): Promise<PassReport & { graphs?: PassReport }> {
  const [services, graphReport] = await Promise.allSettled([reconciler.tick(), graphs?.tick()]);
  if (services.status === 'rejected') throw services.reason;
  if (graphReport.status === 'rejected') throw graphReport.reason;
  return graphReport.value === undefined
    ? services.value
    : { ...services.value, graphs: graphReport.value };
}

function reconcileTickDefinition(deps: {
  reconciler: Reconciler;
  /** The MLGraph controller; without it, MLGraph events are accepted and ignored. */
  graphs?: GraphReconciler;
  readiness: readonly ReadinessCheck[];
}): FunctionDefinition {
  const { reconciler, graphs } = deps;
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
        if (target?.kind === 'graph') await graphs?.reconcileGraph(target.namespace, target.name);
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
          await tickAll(reconciler, graphs);
          return { kind: 'accepted' };
        },
      }),
      onObject(eventTypes.apiServerAdd),
      onObject(eventTypes.apiServerUpdate),
      // A deleted service's or graph's Services go by garbage collection; a deleted one is
      // recreated.
      onObject(eventTypes.apiServerDelete),
    ],
    routes: [
      onRequest({
        method: 'POST',
        path: '/tick',
        async handle() {
          return { kind: 'json', body: await tickAll(reconciler, graphs) };
        },
      }),
    ],
    readiness: deps.readiness,
  });
}

export { reconcileTickDefinition };
