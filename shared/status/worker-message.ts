/**
 * The report an edge worker (or its local controller) sends upstream: seed 000's WorkerMessage
 * `{phase, status, output: {taskInfo: {uploaded}}}`, extended with inference counters, an id for
 * dedupe and a reporter id. Counters are cumulative per reporter (one worker process), which
 * makes a duplicate or reordered report harmless: the total only moves by what a reporter's
 * counter grew. `quality` is not a counter but a snapshot of the edge's own estimates: the
 * latest one received stands.
 */
import { z } from 'zod';

const workerStates = ['Pending', 'Running', 'Completed', 'Failed'] as const;
type WorkerState = (typeof workerStates)[number];

const token = /^[A-Za-z0-9._:-]{1,128}$/;
const count = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

/** Case-insensitive, as Sedna's local controller writes states in lower case. */
const state = z.string().transform((value, ctx): WorkerState => {
  const found = workerStates.find((s) => s.toLowerCase() === value.toLowerCase());
  if (found === undefined) {
    ctx.addIssue({ code: 'custom', message: `must be one of ${workerStates.join(', ')}` });
    return z.NEVER;
  }
  return found;
});

const share = z.number().min(0).max(1);
/** Accuracy in percentage points. */
const points = z.number().min(0).max(100);

/**
 * What the edge measures of its own accuracy against the cloud and of its inputs' drift. The edge
 * builds its report with this schema and upstream-status checks it with the same one; the CRD's
 * `status.quality` is made of the same fields, so the three cannot disagree on a bound.
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
    labelled: count.optional().describe('Edge/cloud answer pairs in the calibration window.'),
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

const workerMessage = z.strictObject({
  id: z.string().regex(token, 'must be 1-128 of [A-Za-z0-9._:-]').optional(),
  reporter: z.string().regex(token, 'must be 1-128 of [A-Za-z0-9._:-]').optional(),
  worker: z.enum(['edge', 'cloud']).default('edge'),
  phase: z.string().min(1).max(63),
  status: state,
  exitCode: z.number().int().min(0).max(255).optional(),
  message: z.string().max(1024).optional(),
  output: z
    .strictObject({
      taskInfo: z
        .strictObject({
          uploaded: count,
          inferenceNumber: count.optional(),
          hardExampleNumber: count.optional(),
          /** Edge-answered inputs also sent to the cloud to measure the edge (a cost). */
          shadowNumber: count.optional(),
        })
        // Each reporter's counters move forward separately, so the totals keep hard examples
        // within inferences (offloadRatio <= 1, as the CRD requires) only if every report that
        // moves hardExampleNumber also carries the inferenceNumber it is bounded by.
        .refine(
          (info) => info.hardExampleNumber === undefined || info.inferenceNumber !== undefined,
          {
            message: 'required when hardExampleNumber is given',
            path: ['inferenceNumber'],
          },
        )
        .refine(
          (info) =>
            info.hardExampleNumber === undefined ||
            info.inferenceNumber === undefined ||
            info.hardExampleNumber <= info.inferenceNumber,
          {
            message: 'hardExampleNumber cannot exceed inferenceNumber',
            path: ['hardExampleNumber'],
          },
        )
        // The same for shadowNumber, which shadowRatio divides by inferenceNumber.
        .refine((info) => info.shadowNumber === undefined || info.inferenceNumber !== undefined, {
          message: 'required when shadowNumber is given',
          path: ['inferenceNumber'],
        })
        .refine(
          (info) =>
            info.shadowNumber === undefined ||
            info.inferenceNumber === undefined ||
            info.shadowNumber <= info.inferenceNumber,
          {
            message: 'shadowNumber cannot exceed inferenceNumber',
            path: ['shadowNumber'],
          },
        )
        .optional(),
      quality: workerQuality.optional(),
    })
    .nullable()
    .optional(),
});

type WorkerMessage = z.output<typeof workerMessage>;

const dnsLabel = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const dnsSubdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** `/:namespace/jointinferenceservices/:name/status` path parameters. */
const serviceParams = z.object({
  namespace: z.string().max(63).regex(dnsLabel, 'must be a lowercase RFC 1123 label'),
  name: z.string().max(253).regex(dnsSubdomain, 'must be a lowercase RFC 1123 subdomain'),
});

/** The event form's subject: `<namespace>/jointinferenceservices/<name>`. */
function parseSubject(subject: string | undefined): z.output<typeof serviceParams> | undefined {
  const parts = subject?.split('/');
  if (parts?.length !== 3 || parts[1] !== 'jointinferenceservices') return undefined;
  const parsed = serviceParams.safeParse({ namespace: parts[0], name: parts[2] });
  return parsed.success ? parsed.data : undefined;
}

export { workerMessage, workerQuality, workerStates, serviceParams, parseSubject };
export type { WorkerMessage, WorkerQuality, WorkerState };
