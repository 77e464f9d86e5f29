/**
 * The FederatedLearningJob kind, registered with the engine: its inputs are its namespace's
 * Datasets and Models and its rounds' progress (the round store the aggregator writes, read
 * through the FederatedProgress port: the controller never imports the aggregator); its desired
 * state is federated-desired.ts's Services; its decision is federated-reconcile.ts's. A change
 * of a Dataset or Model it names reconciles it.
 */
import type { Kube, KubeObject } from '../k8s/index.js';
import { defineKind } from './engine.js';
import type { Registration } from './engine.js';
import { desiredFederated, federatedLabels } from './federated-desired.js';
import type { FederatedDesired, FederatedObject } from './federated-desired.js';
import { reconcileFederated } from './federated-reconcile.js';
import { byName, byNamespace } from './lookup.js';
import type { JobProgress } from './federated-reconcile.js';
import type { WorkerSettings } from './knative-service.js';

/** Where a job's rounds stand: the round store, as the aggregator keeps it. */
interface FederatedProgress {
  /** `job` is `<namespace>/<name>/<uid>`; undefined before its aggregator has started it. */
  read(job: string): Promise<JobProgress | undefined>;
}

interface Inputs {
  datasets: ReadonlyMap<string, KubeObject>;
  models: ReadonlyMap<string, KubeObject>;
  progress: JobProgress | undefined;
}

const jobId = (job: KubeObject) =>
  `${job.metadata.namespace ?? ''}/${job.metadata.name}/${job.metadata.uid ?? ''}`;

/** The job has ended: the round store says so, or every trainer has failed for good. */
function finished(job: FederatedObject, progress: JobProgress | undefined): boolean {
  if (progress?.status === 'done' || progress?.status === 'failed') return true;
  const workers = Object.entries(job.status?.workers ?? {}).filter(([n]) => n !== 'aggregator');
  return workers.length > 0 && workers.every(([, w]) => w.outcome === 'Permanent');
}

function names(job: FederatedObject, kind: 'dataset' | 'model'): string[] {
  const spec = job.spec as
    | {
        aggregationWorker?: { model?: { name?: unknown } };
        pretrainedModel?: { name?: unknown };
        trainingWorkers?: Array<{ dataset?: { name?: unknown } }>;
        evaluationDataset?: { name?: unknown };
      }
    | undefined;
  const listed =
    kind === 'model'
      ? [spec?.aggregationWorker?.model?.name, spec?.pretrainedModel?.name]
      : [
          ...(Array.isArray(spec?.trainingWorkers) ? spec.trainingWorkers : []).map(
            (w) => w.dataset?.name,
          ),
          spec?.evaluationDataset?.name,
        ];
  return listed.filter((n): n is string => typeof n === 'string');
}

function federatedKind(settings: WorkerSettings, progress: FederatedProgress): Registration {
  return defineKind<FederatedObject, Inputs, FederatedDesired>({
    kind: 'federatedLearningJob',
    selector: (name) => `${federatedLabels.job}=${name}`,
    async inputs(kube: Kube, job) {
      const namespace = job.metadata.namespace ?? '';
      const [datasets, models, read] = await Promise.all([
        kube.list('dataset', { namespace }),
        kube.list('model', { namespace }),
        progress.read(jobId(job)),
      ]);
      return { datasets: byName(datasets.items), models: byName(models.items), progress: read };
    },
    async tickInputs(kube: Kube) {
      const [datasets, models] = await Promise.all([kube.list('dataset'), kube.list('model')]);
      const datasetsByNs = byNamespace(datasets.items);
      const modelsByNs = byNamespace(models.items);
      const none = new Map<string, KubeObject>();
      return async (job) => ({
        datasets: datasetsByNs.get(job.metadata.namespace ?? '') ?? none,
        models: modelsByNs.get(job.metadata.namespace ?? '') ?? none,
        progress: await progress.read(jobId(job)),
      });
    },
    desired: (job, inputs) =>
      desiredFederated(job, inputs, settings, finished(job, inputs.progress)),
    wanted: (desired) =>
      desired.valid
        ? [desired.aggregator, ...desired.trainers.map((t) => t.service)].map(
            (s) => s.metadata.name,
          )
        : [],
    decide: ({ owner, owned, taken, inputs }, desired, now, options) =>
      reconcileFederated(
        { job: owner, owned, taken, models: inputs.models, progress: inputs.progress },
        desired,
        now,
        options,
      ),
    uses: [
      { kind: 'dataset', by: (job, name) => names(job, 'dataset').includes(name) },
      { kind: 'model', by: (job, name) => names(job, 'model').includes(name) },
    ],
  });
}

export { federatedKind };
export type { FederatedProgress };
