/** reconcile-tick: the JointInferenceService and MLGraph controller (see shared/controller). */
import type { FunctionFactory } from '../../shared/http/index.js';
import {
  createGraphReconciler,
  createReconciler,
  loadControllerConfig,
  reconcileTickDefinition,
} from '../../shared/controller/index.js';
import { createKube, loadKubeConfig } from '../../shared/k8s/index.js';

const factory: FunctionFactory = async ({ telemetry }) => {
  const config = loadControllerConfig();
  const kube = createKube(loadKubeConfig());
  const options = {
    kube,
    settings: config.workers,
    heartbeatMs: config.heartbeatMs,
    concurrency: config.concurrency,
    log: telemetry.log,
  };
  const definition = reconcileTickDefinition({
    reconciler: createReconciler(options),
    graphs: createGraphReconciler({ ...options, settings: config.graphs }),
    readiness: [{ name: 'kubernetes', check: () => kube.ping() }],
  });
  return { definition, close: async () => {} };
};

export default factory;
