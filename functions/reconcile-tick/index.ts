/** reconcile-tick: the control plane's one reconcile engine and its kinds (see shared/controller). */
import type { FunctionFactory } from '../../shared/http/index.js';
import {
  createController,
  jointInferenceKind,
  loadControllerConfig,
  mlGraphKind,
  reconcileTickDefinition,
} from '../../shared/controller/index.js';
import { createKube, loadKubeConfig } from '../../shared/k8s/index.js';

const factory: FunctionFactory = async ({ telemetry }) => {
  const config = loadControllerConfig();
  const kube = createKube(loadKubeConfig());
  const controller = createController({
    kube,
    kinds: [jointInferenceKind(config.workers), mlGraphKind(config.graphs)],
    heartbeatMs: config.heartbeatMs,
    concurrency: config.concurrency,
    log: telemetry.log,
  });
  const definition = reconcileTickDefinition({
    controller,
    readiness: [{ name: 'kubernetes', check: () => kube.ping() }],
  });
  return { definition, close: async () => {} };
};

export default factory;
