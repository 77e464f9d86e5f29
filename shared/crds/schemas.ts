/**
 * The custom resources' schemas, written once in zod: the functions validate with them and the
 * CRDs' openAPIV3Schema is generated from them (npm run crds), so the two cannot drift apart.
 * Unions are avoided on purpose: Kubernetes structural schemas cannot express them.
 */
import { z } from 'zod';

const dnsLabel = z
  .string()
  .min(1)
  .max(63)
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'must be a lowercase RFC 1123 label');
const dnsSubdomain = z
  .string()
  .min(1)
  .max(253)
  .regex(
    /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/,
    'must be a lowercase RFC 1123 subdomain',
  );
const fraction = z.number().min(0).max(1);

/**
 * The one list of miners: what the CRD accepts is what the edge worker can run (shared/inference/
 * hem.ts implements each name, and fails to compile when one is missing).
 */
const hemNames = [
  'IBT',
  'Threshold',
  'CrossEntropy',
  'Random',
  'EdgeOnly',
  'CloudOnly',
  'Margin',
] as const;
type HemName = (typeof hemNames)[number];

const miningModes = ['inference-then-mining', 'mining-then-inference'] as const;
const fallbackPolicies = ['edge-result', 'error'] as const;
const offloadModes = ['sync', 'async'] as const;
/** Seed 004's policies, applied to worker failures the edge reports upstream. */
const restartPolicies = ['Always', 'OnFailure', 'Never', 'ExitCode'] as const;

/** The seed's free-form worker parameters: a list of string key/value pairs. */
const workerSpec = z
  .object({
    scriptDir: z.string().optional(),
    scriptBootFile: z.string().optional(),
    frameworkType: z.string().optional(),
    frameworkVersion: z.string().optional(),
    parameters: z.array(z.object({ key: z.string().min(1), value: z.string() })).optional(),
  })
  .describe('Worker settings from the Sedna design; parameters reach the worker as environment.');

const scale = z
  .object({
    minScale: z.number().int().min(0).optional(),
    maxScale: z.number().int().min(1).optional(),
  })
  .describe('Knative autoscaling bounds for the worker Service.');

const restartPolicy = z
  .enum(restartPolicies)
  .optional()
  .describe(
    'What a reported worker failure does: Always and OnFailure restart (OnFailure not after exit 0), Never does not, ExitCode restarts on 128-255 only. Default Always.',
  );

const modelRef = z.object({ name: dnsSubdomain.describe('A Model in the same namespace.') });

const hardExampleAlgorithm = z.object({
  name: z.enum(hemNames).describe('Hard-example mining algorithm.'),
  parameters: z
    .object({
      threshold: fraction
        .optional()
        .describe('Confidence below which an input is hard (Threshold, IBT).'),
      thresholdImg: fraction
        .optional()
        .describe('IBT: share of low-confidence boxes that makes an image hard.'),
      thresholdBox: fraction.optional().describe('IBT: confidence below which a box is low.'),
      ratio: fraction.optional().describe('Random: share of inputs sent to the cloud.'),
      margin: fraction
        .optional()
        .describe('Margin: top-1 minus top-2 probability below which an input is hard.'),
      targetOffloadRatio: fraction
        .optional()
        .describe('Budget mode: keep this share of inputs offloaded.'),
      seed: z.number().int().optional(),
    })
    .optional(),
});

const taskKinds = ['auto', 'raw', 'classification', 'detection'] as const;
const boxFormats = ['xyxy', 'yxyx', 'xywh', 'cxcywh'] as const;
const switches = ['auto', 'always', 'never'] as const;
const outputName = z.string().min(1).max(256);

/**
 * How a worker reads its model's outputs for joint inference (one object, not a union: a
 * structural schema cannot express unions). `auto` reads the model's signature: an output
 * named like boxes makes it a detector, a single [N, C] output a classifier, anything else raw.
 */
const task = z
  .object({
    kind: z
      .enum(taskKinds)
      .optional()
      .describe('auto (default), raw, classification or detection.'),
    output: outputName.optional().describe('classification: the output holding scores or logits.'),
    softmax: z
      .enum(switches)
      .optional()
      .describe('classification: auto applies softmax to rows that are not distributions.'),
    boxes: outputName.optional().describe('detection: the output holding boxes [N, K, 4].'),
    boxFormat: z.enum(boxFormats).optional().describe('detection: box layout, default xyxy.'),
    scores: outputName.optional().describe('detection: per-box confidence [N, K].'),
    classes: outputName
      .optional()
      .describe('detection: class ids [N, K] or per-class scores [N, K, C].'),
    count: outputName
      .optional()
      .describe('detection: valid boxes per image [N] (the model did NMS).'),
    scoreFloor: fraction.optional().describe('detection: boxes scoring below are dropped.'),
    nms: z
      .enum(switches)
      .optional()
      .describe('detection: auto runs NMS unless the model gives a count output.'),
    nmsThreshold: fraction
      .optional()
      .describe('detection: NMS IoU; default the nms_threshold worker parameter, else 0.5.'),
    agnosticNms: z
      .boolean()
      .optional()
      .describe('detection: NMS across classes (true), not per class (default false).'),
    maxDetections: z.number().int().min(1).max(1000).optional(),
  })
  .describe('What the model outputs mean: the task view hard-example mining reads.');

const placement = {
  nodeName: dnsSubdomain.optional().describe('Pin the worker to this node.'),
  nodeSelector: z.record(z.string(), z.string()).optional().describe('Or select nodes by label.'),
};

const jointInferenceServiceSpec = z.object({
  edgeWorker: z.object({
    name: z.string().optional(),
    model: modelRef,
    ...placement,
    hardExampleAlgorithm,
    task: task.optional(),
    miningMode: z.enum(miningModes).optional().describe('Default inference-then-mining.'),
    offload: z
      .object({
        mode: z
          .enum(offloadModes)
          .optional()
          .describe('sync: the edge calls the cloud; async: a hard-example event.'),
        deadlineMs: z.number().int().min(1).max(60_000).optional(),
        fallback: z
          .enum(fallbackPolicies)
          .optional()
          .describe('When the cloud fails: the edge result, marked, or an error.'),
        accuracyObjective: z
          .number()
          .min(0)
          .max(100)
          .optional()
          .describe(
            'Largest accuracy loss against the cloud accepted, in points; the edge calibrates its offload cut online to keep it.',
          ),
        shadowRate: fraction
          .optional()
          .describe(
            "Share of edge-answered inputs also sent to the cloud to measure the edge's accuracy (default 0.05 when an objective is set).",
          ),
      })
      .optional(),
    workerSpec: workerSpec.optional(),
    scale: scale.optional(),
    restartPolicy,
  }),
  cloudWorker: z.object({
    name: z.string().optional(),
    model: modelRef,
    ...placement,
    task: task.optional(),
    workerSpec: workerSpec.optional(),
    scale: scale.optional(),
    restartPolicy,
  }),
});

const condition = z.object({
  type: z.string().min(1),
  status: z.enum(['True', 'False', 'Unknown']),
  reason: z.string().optional(),
  message: z.string().optional(),
  lastTransitionTime: z.string().optional(),
  lastProbeTime: z.string().optional(),
});

const count = z.number().int().min(0);

/**
 * One worker's last report (written by upstream-status) and what the reconciler did about it:
 * `handledReport` is the reportTime of the failure already acted on, so a failure restarts the
 * worker once, however often the reconciler runs.
 */
const workerStatus = z.object({
  state: z
    .string()
    .optional()
    .describe('Last reported state: Pending, Running, Completed, Failed.'),
  exitCode: z.number().int().min(0).max(255).optional(),
  message: z.string().optional(),
  reportTime: z.string().optional(),
  handledReport: z.string().optional(),
  outcome: z
    .string()
    .optional()
    .describe(
      'Restarted; Recovered once the restarted revision is ready; Permanent when the policy stops the worker; None otherwise.',
    ),
  restarts: count.optional(),
  restartedAt: z.string().optional(),
  failedGeneration: count.optional(),
});

const share = z.number().min(0).max(1);
/** Accuracy in percentage points. */
const points = z.number().min(0).max(100);
const reportedCount = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

/**
 * What the edge measures of its own accuracy against the cloud and of its inputs' drift. The edge
 * builds its report with this schema and upstream-status checks it with the same one (the
 * WorkerMessage, shared/messages/worker-message.ts); the CRD's `status.quality` below is made of
 * the same fields, so the three cannot disagree on a bound.
 */
const workerQuality = z
  .strictObject({
    accuracyObjective: points
      .optional()
      .describe('Largest accuracy loss against the cloud accepted, in points.'),
    estimatedEdgeAccuracy: share
      .optional()
      .describe("The edge's agreement with the cloud over the recent window."),
    estimatedJointLoss: points
      .optional()
      .describe('Estimated accuracy loss of the joint answers against the cloud, in points.'),
    cut: share.optional().describe('The hardness cut in force.'),
    shadowRate: share
      .optional()
      .describe('Configured share of edge-answered inputs also sent to the cloud.'),
    labelled: reportedCount
      .optional()
      .describe('Edge/cloud answer pairs in the calibration window.'),
    driftScore: z.number().min(0).optional().describe('Input drift test statistic.'),
    driftThreshold: z
      .number()
      .min(0)
      .optional()
      .describe('Score above which the inputs are taken to drift.'),
    drifting: z.boolean().optional().describe('The drift detector fires.'),
    driftWindow: z
      .number()
      .int()
      .min(1)
      .max(Number.MAX_SAFE_INTEGER)
      .optional()
      .describe('Inputs in the drift test window.'),
    outlierShare: share
      .optional()
      .describe("Share of the window's inputs scoring above the reference's 95th percentile."),
  })
  // A score says nothing by itself: the DataDrift condition is set from the detector's verdict.
  .refine((quality) => quality.driftScore === undefined || quality.drifting !== undefined, {
    message: 'required when driftScore is given',
    path: ['drifting'],
  });

type WorkerQuality = z.output<typeof workerQuality>;

/**
 * The latest quality report of the edge (written by upstream-status); the reconciler sets the
 * DataDrift condition from it. Not strict and without the report's refinements: a status is what
 * was reported, checked when it was.
 */
const quality = z
  .object({
    ...workerQuality.shape,
    reportTime: z.string().optional().describe('When upstream-status received the report.'),
  })
  .describe("The edge's latest estimates of its accuracy against the cloud and of input drift.");

const jointInferenceServiceStatus = z.object({
  conditions: z.array(condition).optional(),
  observedGeneration: count.optional(),
  startTime: z.string().optional(),
  completionTime: z.string().optional(),
  lastReconcileTime: z.string().optional(),
  edgeWorkerState: z.string().optional(),
  cloudWorkerState: z.string().optional(),
  activeWorkers: count.optional(),
  failedWorkers: count.optional(),
  uploadCount: count.optional(),
  inferenceNumber: count.optional(),
  hardExampleNumber: count.optional(),
  offloadRatio: fraction.optional(),
  shadowCount: count
    .optional()
    .describe('Edge-answered inputs also sent to the cloud to measure the edge.'),
  shadowRatio: fraction.optional().describe('shadowCount / inferenceNumber.'),
  quality: quality.optional(),
  workers: z.object({ edge: workerStatus.optional(), cloud: workerStatus.optional() }).optional(),
});

const modelSpec = z.object({
  url: z
    .string()
    .regex(/^(file|https?|s3):\/\/\S+$/, 'must be a file://, http(s):// or s3:// URL')
    .describe('Where the model file is.'),
  format: z.enum(['onnx']),
  sha256: z
    .string()
    .regex(/^[0-9a-f]{64}$/, 'must be 64 lowercase hex digits')
    .optional()
    .describe('Expected digest; a mismatch refuses the model.'),
});

const modelStatus = z.object({
  conditions: z.array(condition).optional(),
  observedGeneration: count.optional(),
});

type JointInferenceServiceSpec = z.output<typeof jointInferenceServiceSpec>;
type JointInferenceServiceStatus = z.output<typeof jointInferenceServiceStatus>;
type ModelSpec = z.output<typeof modelSpec>;
type TaskSpec = z.output<typeof task>;

export {
  jointInferenceServiceSpec,
  jointInferenceServiceStatus,
  modelSpec,
  modelStatus,
  condition,
  dnsLabel,
  dnsSubdomain,
  hemNames,
  workerQuality,
  miningModes,
  fallbackPolicies,
  offloadModes,
  restartPolicies,
  task,
  taskKinds,
  boxFormats,
};
export type {
  JointInferenceServiceSpec,
  JointInferenceServiceStatus,
  ModelSpec,
  TaskSpec,
  HemName,
  WorkerQuality,
};
