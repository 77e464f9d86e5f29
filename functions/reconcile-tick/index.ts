/**
 * reconcile-tick: the JointInferenceService controller. The PingSource tick reconciles every
 * service; an ApiServerSource event (a service, or a worker Service it owns) reconciles one.
 */
import { z } from 'zod';
import type { FunctionFactory } from '../../bin/serve.js';
import {
  createReconciler,
  kubeObjectData,
  loadControllerConfig,
  serviceFor,
} from '../../shared/controller/index.js';
import { eventTypes } from '../../shared/events/index.js';
import { defineFunction, onEvent, onRequest } from '../../shared/http/index.js';
import { createKube, loadKubeConfig } from '../../shared/k8s/index.js';

const factory: FunctionFactory = async ({ telemetry }) => {
  const config = loadControllerConfig();
  const kube = createKube(loadKubeConfig());
  const reconciler = createReconciler({
    kube,
    settings: config.workers,
    heartbeatMs: config.heartbeatMs,
    concurrency: config.concurrency,
    log: telemetry.log,
  });
  const onObject = (type: string) =>
    onEvent({
      type,
      data: kubeObjectData,
      async handle({ data }) {
        const target = serviceFor(data);
        if (target !== undefined) await reconciler.reconcileService(target.namespace, target.name);
        return { kind: 'accepted' };
      },
    });
  const definition = defineFunction({
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
    readiness: [{ name: 'kubernetes', check: () => kube.ping() }],
  });
  return { definition, close: async () => {} };
};

export default factory;
