/**
 * What a client sends the aset-scheduler, checked at the boundary: a stream's requirements in the
 * paper's terms (section III-A) and an id of the client's choosing, which makes a retried request
 * an idempotent one. Units are types.ts's: milliseconds, queries per second, sizes as a fraction
 * of the largest input a variant accepts.
 */
import { z } from 'zod';

const streamId = z
  .string()
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/,
    'must be 1-128 of [A-Za-z0-9._:-], starting with a letter or digit',
  );

const label = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'must be 1-64 of [A-Za-z0-9._-]');

const streamRequest = z
  .object({
    id: streamId,
    /** The access point (scheduler) the stream's source sits behind: picks d_n^s per cluster. */
    scheduler: label,
    /** The inference task; only workers of a model for this task qualify (constraint 1). */
    task: label,
    /** D^i. */
    maxDelayMs: z.number().positive().max(600_000),
    /** A^i, in the variants' accuracy unit (mAP). */
    minAccuracy: z.number().min(0).max(100),
    /** rho_i, frames per second. */
    rate: z.number().positive().max(1_000),
    /** zeta_i, (0, 1]. */
    size: z.number().positive().max(1),
    /** b_i: ms to send a full-size input; 0 when the client's deadline already excludes it. */
    transmissionMsPerSize: z.number().min(0).max(60_000).default(0),
    /** delta_i: the source's access delay to its scheduler; 0 when already excluded. */
    accessDelayMs: z.number().min(0).max(60_000).default(0),
    /** How long the stream runs; its binding is released after this (plus a grace) at the latest. */
    durationS: z.number().positive().max(86_400),
    /** A label for reports, e.g. the Table I app. */
    app: label.optional(),
  })
  .strict();

type StreamRequest = z.output<typeof streamRequest>;

/** The end of a stream: its id. */
const streamEnd = z.object({ id: streamId }).strict();

/** Delivered responses per worker over a period, from a cluster's monitoring agent. */
const responsesReport = z
  .object({
    /** The report's id: a resent report is counted once. */
    id: streamId,
    reports: z
      .array(
        z
          .object({
            variant: label,
            cluster: label,
            responses: z.number().int().min(0).max(10_000_000),
          })
          .strict(),
      )
      .min(1)
      .max(1_000),
  })
  .strict();

type ResponsesReport = z.output<typeof responsesReport>;

export { streamRequest, streamEnd, streamId, responsesReport };
export type { StreamRequest, ResponsesReport };
