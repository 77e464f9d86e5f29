/**
 * edge-infer and cloud-infer as functions: the Open Inference Protocol v2 routes (infer, model
 * metadata and readiness, server health), `POST /predict` taking either request form, and the
 * CloudEvent forms (edge: inference.requested; cloud: inference.hard-example; both reply
 * inference.completed).
 */
import { z } from 'zod';
import { NotFoundError, ValidationError } from '../errors/index.js';
import { eventTypes } from '../events/index.js';
import { decodeJsonBody, defineFunction, onEvent, onRawRequest, onRequest } from '../http/index.js';
import type { Answer, FunctionDefinition, ReadinessCheck } from '../http/index.js';
import { localAnswers } from './event-answers.js';
import type { AnswerOnce } from './event-answers.js';
import { jointInfer } from './joint.js';
import { createTurns } from './turns.js';
import type { JointDeps } from './joint.js';
import type { InferencePool } from './pool.js';
import { formatInferResponse, modelMetadata, parseInferRequest } from './protocol.js';
import type { InferAnswer, SampleResult } from './protocol.js';

interface ServedModel {
  name: string;
  version: string;
}

type Answerer = (input: Float32Array, rows: number, traceparent: string) => Promise<SampleResult[]>;

/** Bodies above this wait their turn (turns.ts): a 64-row FP32 batch is 200 KB. */
const largeBodyBytes = 64 << 10;

function inferenceDefinition(options: {
  name: 'edge-infer' | 'cloud-infer';
  model: ServedModel;
  pool: InferencePool;
  maxBatch: number;
  answer: Answerer;
  consumes: string;
  readiness: readonly ReadinessCheck[];
  onAnswered?: (results: readonly SampleResult[]) => void;
  /** Where replicas share event answers (event-answers.ts); without it, per process. */
  sharedAnswers?: AnswerOnce;
}): FunctionDefinition {
  const { model, pool } = options;
  const modelParam = z.object({ model: z.string().min(1).max(63) });
  const checkModel = (name: string) => {
    if (name !== model.name) {
      throw new NotFoundError(
        `model ${name} is not served here (this worker serves ${model.name})`,
      );
    }
  };
  const infer = async (
    body: unknown,
    traceparent: string,
    binary?: Uint8Array,
    event = false,
  ): Promise<InferAnswer> => {
    const batch = parseInferRequest(body, pool.inputWidth, options.maxBatch, binary);
    if (event && batch.binaryOutputs !== undefined) {
      throw new ValidationError(
        'data: binary outputs (binary_data_output, binary_data) are for HTTP requests; CloudEvent answers are JSON',
      );
    }
    const results = await options.answer(batch.input, batch.rows, traceparent);
    options.onAnswered?.(results);
    return formatInferResponse(batch, model, results);
  };
  const json = (body: unknown): Answer => ({ kind: 'json', body });
  const turn = createTurns();
  const http = async (body: unknown, traceparent: string, binary?: Uint8Array): Promise<Answer> => {
    const answer = await infer(body, traceparent, binary);
    if (answer.binary === undefined) return json(answer.header);
    const header = Buffer.from(JSON.stringify(answer.header));
    return {
      kind: 'bytes',
      contentType: 'application/octet-stream',
      headers: { 'inference-header-content-length': String(header.length) },
      body: Buffer.concat([header, answer.binary]),
    };
  };
  const inferEvent = async (data: unknown, traceparent: string) =>
    (await infer(data, traceparent, undefined, true)).header;
  // A redelivered event (same source and id) gets the first delivery's answer instead of a
  // second inference: counted once, answered the same (across replicas with `sharedAnswers`).
  const once = localAnswers(options.sharedAnswers);
  return defineFunction({
    name: options.name,
    // Binary tensor data starts right after the JSON header: read it aligned, to use in place.
    alignBodyAt(headers) {
      const length = Number(headers['inference-header-content-length']);
      return Number.isSafeInteger(length) && length > 0 ? length : undefined;
    },
    routes: [
      onRawRequest({
        method: 'POST',
        path: '/v2/models/:model/infer',
        params: modelParam,
        async handle({ params, body }, ctx) {
          checkModel(params.model);
          if (body.bytes.length > largeBodyBytes) await turn();
          const header = ctx.headers['inference-header-content-length'];
          if (header === undefined) {
            return http(decodeJsonBody(body.bytes, body.contentType), ctx.traceparent);
          }
          const length = Number(header);
          if (!Number.isInteger(length) || length <= 0 || length > body.bytes.length) {
            throw new ValidationError(
              `Inference-Header-Content-Length: ${String(header)} is not a length within the ${body.bytes.length}-byte body`,
            );
          }
          let request: unknown;
          try {
            request = JSON.parse(body.bytes.subarray(0, length).toString('utf8'));
          } catch {
            throw new ValidationError('body: the inference header is not valid JSON');
          }
          return http(request, ctx.traceparent, body.bytes.subarray(length));
        },
      }),
      onRequest({
        method: 'POST',
        path: '/predict',
        body: z.unknown(),
        handle: async ({ body }, ctx) => http(body, ctx.traceparent),
      }),
      onRequest({
        method: 'GET',
        path: '/v2/models/:model',
        params: modelParam,
        async handle({ params }) {
          checkModel(params.model);
          return json(
            modelMetadata({ ...model, inputWidth: pool.inputWidth, outputWidth: pool.outputWidth }),
          );
        },
      }),
      onRequest({
        method: 'GET',
        path: '/v2/models/:model/ready',
        params: modelParam,
        async handle({ params }) {
          checkModel(params.model);
          return json({ name: model.name, ready: true });
        },
      }),
      onRequest({
        method: 'GET',
        path: '/v2/health/live',
        handle: async () => json({ live: true }),
      }),
      onRequest({
        method: 'GET',
        path: '/v2/health/ready',
        handle: async () => json({ ready: true }),
      }),
    ],
    events: [
      onEvent({
        type: options.consumes,
        data: z.unknown(),
        replies: [eventTypes.inferenceCompleted],
        async handle({ data, event }, ctx) {
          return {
            kind: 'reply',
            event: {
              type: eventTypes.inferenceCompleted,
              ...(event.subject === undefined ? {} : { subject: event.subject }),
              data: await once(`${event.source.length}:${event.source}:${event.id}`, () =>
                inferEvent(data, ctx.traceparent),
              ),
            },
          };
        },
      }),
    ],
    readiness: options.readiness,
  });
}

/** edge-infer: the small model plus hard-example mining and offload. */
function edgeInferDefinition(options: {
  model: ServedModel;
  joint: JointDeps;
  maxBatch: number;
  readiness: readonly ReadinessCheck[];
  onAnswered?: (results: readonly SampleResult[]) => void;
  sharedAnswers?: AnswerOnce;
}): FunctionDefinition {
  return inferenceDefinition({
    ...(options.onAnswered === undefined ? {} : { onAnswered: options.onAnswered }),
    ...(options.sharedAnswers === undefined ? {} : { sharedAnswers: options.sharedAnswers }),
    name: 'edge-infer',
    model: options.model,
    pool: options.joint.edge,
    maxBatch: options.maxBatch,
    answer: (input, rows, traceparent) => jointInfer(options.joint, input, rows, traceparent),
    consumes: eventTypes.inferenceRequested,
    readiness: options.readiness,
  });
}

/** cloud-infer: the big model, nothing else. */
function cloudInferDefinition(options: {
  model: ServedModel;
  pool: InferencePool;
  maxBatch: number;
  readiness: readonly ReadinessCheck[];
  onAnswered?: (results: readonly SampleResult[]) => void;
}): FunctionDefinition {
  const classes = options.pool.outputWidth;
  return inferenceDefinition({
    ...(options.onAnswered === undefined ? {} : { onAnswered: options.onAnswered }),
    name: 'cloud-infer',
    model: options.model,
    pool: options.pool,
    maxBatch: options.maxBatch,
    async answer(input, rows) {
      const out = await options.pool.infer(input, rows);
      return Array.from({ length: rows }, (_, i) => {
        const p = out.subarray(i * classes, (i + 1) * classes);
        return {
          probabilities: p,
          tier: 'cloud' as const,
          hard: false,
          fallback: false,
          edge: undefined,
          cloud: p,
        };
      });
    },
    consumes: eventTypes.inferenceHardExample,
    readiness: options.readiness,
  });
}

export { edgeInferDefinition, cloudInferDefinition };
export type { ServedModel };
