/**
 * The report an edge worker (or its local controller) sends upstream: seed 000's WorkerMessage
 * `{phase, status, output: {taskInfo: {uploaded}}}`, extended with inference counters, an id for
 * dedupe and a reporter id. Counters are cumulative per reporter (one worker process), which
 * makes a duplicate or reordered report harmless: the total only moves by what a reporter's
 * counter grew. `quality` is not a counter but a snapshot of the edge's own estimates: the
 * latest one received stands.
 *
 * One contract, both ends: shared/inference/reporter.ts builds a `WorkerMessage` and posts it to
 * `reportPath`, naming its node in `nodeHeader` and proving it with the Secret `nodeTokenSecret`
 * (which reconcile-tick mounts into the worker); upstream-status (shared/status) parses the body
 * with `workerMessage`, the path with `serviceParams` (the event form's subject with
 * `parseSubject`) and reads the token from the same Secret.
 */
import { z } from 'zod';
import { workerQuality } from '../crds/index.js';

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
      // The CRD's own schema: what the status shows is what the edge may send.
      quality: workerQuality.optional(),
    })
    .nullable()
    .optional(),
});

/**
 * A report as upstream-status reads it. The edge builds one of these too: every value of it is
 * also one the schema accepts (the state is already one of `workerStates`, the worker is given).
 */
type WorkerMessage = z.output<typeof workerMessage>;

const dnsLabel = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const dnsSubdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** The report's HTTP route on upstream-status. */
const reportRoute = '/:namespace/jointinferenceservices/:name/status';

/** `reportRoute` for one service, relative to upstream-status's base URL. */
function reportPath(namespace: string, name: string): string {
  return `${encodeURIComponent(namespace)}/jointinferenceservices/${encodeURIComponent(name)}/status`;
}

/** `reportRoute`'s path parameters. */
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

/** The HTTP form's header naming the reporting node (beside `Authorization: Bearer <token>`). */
const nodeHeader = 'x-edgeai-node';

/**
 * Each edge node's token: the key `token` of the Secret `edgeai-node-<node>`, in the namespace
 * upstream-status reads; reconcile-tick mounts the same Secret into the edge worker.
 */
const nodeTokenSecret = {
  name: (node: string): string => `edgeai-node-${node}`,
  key: 'token',
} as const;

export {
  workerMessage,
  reportRoute,
  reportPath,
  serviceParams,
  parseSubject,
  nodeHeader,
  nodeTokenSecret,
};
export type { WorkerMessage, WorkerState };
