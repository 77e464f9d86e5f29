/**
 * What an inference worker exposes on /metrics beyond the request metrics: decisions by tier
 * (and whether the edge result stood in for the cloud), time per model call by tier, rows per
 * session run, the queue, and the offload ratio since start.
 */
import { defineMetrics } from '../telemetry/index.js';
import type { Telemetry } from '../telemetry/index.js';
import type { WorkerCounters } from './joint.js';
import { cutHardness } from './objective.js';
import type { QualityState } from './quality-window.js';

const seconds = [
  0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5,
];
const rows = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];

function inferenceMetrics(
  telemetry: Pick<Telemetry, 'withRegistry'>,
  sources: { counters?: WorkerCounters; queuedRows: () => number },
) {
  const m = defineMetrics(telemetry);
  const decisions = m.counter(
    'edgeai_inference_decisions_total',
    'Samples answered, by the tier that answered and whether the edge result stood in for the cloud',
    ['tier', 'fallback'],
  );
  const calls = m.histogram(
    'edgeai_inference_call_seconds',
    'Time of one model call, by tier and outcome',
    seconds,
    ['tier', 'outcome'],
  );
  const batch = m.histogram(
    'edgeai_inference_batch_rows',
    'Rows per onnxruntime session run',
    rows,
  );
  m.gauge(
    'edgeai_inference_queue_rows',
    'Rows waiting for an inference thread',
    sources.queuedRows,
  );
  const counters = sources.counters;
  if (counters !== undefined) {
    m.gauge('edgeai_offload_ratio', 'Hard examples over inferences since the worker started', () =>
      counters.inferenceNumber === 0 ? 0 : counters.hardExampleNumber / counters.inferenceNumber,
    );
  }
  return {
    answered: (results: ReadonlyArray<{ tier: 'edge' | 'cloud'; fallback: boolean }>) => {
      let edge = 0;
      let cloud = 0;
      let fallback = 0;
      for (const r of results) {
        if (r.fallback) fallback += 1;
        else if (r.tier === 'cloud') cloud += 1;
        else edge += 1;
      }
      if (edge > 0) decisions({ tier: 'edge', fallback: 'false' }, edge);
      if (cloud > 0) decisions({ tier: 'cloud', fallback: 'false' }, cloud);
      if (fallback > 0) decisions({ tier: 'edge', fallback: 'true' }, fallback);
    },
    observe: {
      edge: (s: number) => calls({ tier: 'edge', outcome: 'ok' }, s),
      cloud: (s: number, ok: boolean) => calls({ tier: 'cloud', outcome: ok ? 'ok' : 'failed' }, s),
    },
    batchRows: (n: number) => batch({}, n),
  };
}

/**
 * The accuracy objective and the drift test, as gauges read at scrape time from the shared
 * window (so every replica shows the service's figures), and shadow calls by outcome.
 */
function qualityMetrics(
  telemetry: Pick<Telemetry, 'withRegistry'>,
  sources: { state: () => QualityState; counters: WorkerCounters },
) {
  const m = defineMetrics(telemetry);
  const estimate = () => sources.state().estimate;
  const drift = () => sources.state().drift;
  m.gauge(
    'edgeai_estimated_edge_accuracy',
    "Estimated share of inputs on which the edge model agrees with the cloud's, over the calibration window",
    () => estimate()?.edgeAgreement ?? Number.NaN,
  );
  m.gauge(
    'edgeai_estimated_joint_loss_points',
    'Estimated accuracy loss of the joint answers against the cloud, in points',
    () => 100 * (estimate()?.loss ?? Number.NaN),
  );
  m.gauge(
    'edgeai_offload_cut',
    'Hardness above which inputs are offloaded, as the accuracy objective set it',
    () => {
      const cut = estimate()?.cut;
      return cut === undefined ? Number.NaN : cutHardness(cut);
    },
  );
  m.gauge(
    'edgeai_shadow_ratio',
    'Shadow samples (edge-answered inputs also sent to the cloud) over inferences since the worker started',
    () =>
      sources.counters.inferenceNumber === 0
        ? 0
        : sources.counters.shadowNumber / sources.counters.inferenceNumber,
  );
  m.gauge(
    'edgeai_drift_score',
    "The drift test's z statistic of the outlier share against the reference's",
    () => drift()?.score ?? Number.NaN,
  );
  m.gauge('edgeai_drift_active', '1 while the inputs are found to drift', () =>
    drift()?.drifting === true ? 1 : 0,
  );
  const shadow = m.counter(
    'edgeai_shadow_samples_total',
    'Shadow samples by outcome (skipped: the in-flight cap was reached)',
    ['outcome'],
  );
  return {
    shadowOutcome: (outcome: 'ok' | 'failed' | 'skipped', rows: number) =>
      shadow({ outcome }, rows),
  };
}

export { inferenceMetrics, qualityMetrics };
