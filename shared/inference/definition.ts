/**
 * edge-infer and cloud-infer as functions: the Open Inference Protocol v2 REST routes as the
 * spec writes them (server metadata and health, model metadata and readiness, infer, each also
 * under /versions/{version}), errors on them as `{"error": "<message>"}`, `POST /predict` with
 * the instances form, and the CloudEvent forms (edge: inference.requested; cloud:
 * inference.hard-example; both reply inference.completed).
 */
import { isUtf8 } from 'node:buffer';
import { z } from 'zod';
import type { WorkerQuality } from '../crds/index.js';
import {
  NotFoundError,
  UnavailableError,
  UnsupportedMediaTypeError,
  ValidationError,
} from '../errors/index.js';
// By file: the domain's index loads the CloudEvents SDK, which the HTTP front loads only for
// the first request that carries an event (shared/http/handler.ts).
import { eventTypes } from '../events/catalogue.js';
import { parseMediaType } from '../events/media.js';
import type { IncomingEvent } from '../events/index.js';
import { decodeJsonBody, defineFunction, onEvent, onRawRequest, onRequest } from '../http/index.js';
import type {
  Answer,
  FunctionDefinition,
  HttpRoute,
  RawBody,
  ReadinessCheck,
} from '../http/index.js';
import { releaseBody } from '../http/index.js';
import { localAnswers } from './event-answers.js';
import type { AnswerOnce } from './event-answers.js';
import { formatPredictions, parseInstances } from './instances.js';
import { jointInfer, jointOutputs, jointTensors } from './joint.js';
import type { JointDeps } from './joint.js';
import type { InferencePool, PoolHealth } from './pool.js';
import { formatInferResponse, modelConfig, modelMetadata, parseInferRequest } from './protocol.js';
import type { InferAnswer, InferRequest } from './protocol.js';
import type { TaskAdapter } from './task.js';
import type { Signature, Tensor, TensorSpec } from './tensor.js';
import { largeWork } from './turns.js';

interface ServedModel {
  name: string;
  version: string;
}

/** Who answered each sample, for the decision metrics. */
type Answered = ReadonlyArray<{ tier: 'edge' | 'cloud'; fallback: boolean }>;

/** A worker's answer to a parsed request: the served tensors, and who answered each sample. */
type Answerer = (
  request: InferRequest,
  traceparent: string,
) => Promise<{ tensors: Record<string, Tensor>; answered: Answered }>;

/** Bodies above this wait their turn (turns.ts): a 64-row FP32 batch of 784 is 200 KB. */
const largeBodyBytes = 64 << 10;

/** This server's answer to `GET /v2`. */
const serverMetadata = {
  name: 'edgeai',
  version: '0.2.0',
  extensions: ['binary_tensor_data', 'model_configuration'],
};

/**
 * A JSON body as decodeJsonBody reads it, the common case faster: an object in valid UTF-8 is
 * parsed from the bytes' string at once (isUtf8 checks them several times faster than a fatal
 * TextDecoder decodes them, ~10 us of a 14 KB batch-1 body); anything else, or a parse that
 * fails, goes through decodeJsonBody for its exact answer (a BOM, an empty body, the error).
 */
function jsonBody(bytes: Buffer): unknown {
  if (bytes.length > 0 && bytes[0] === 0x7b && isUtf8(bytes)) {
    try {
      return JSON.parse(bytes.toString('utf8')) as unknown;
    } catch {
      // decodeJsonBody names the problem.
    }
  }
  return decodeJsonBody(bytes, 'application/json');
}

/** The infer request in a raw body: JSON (any or no Content-Type), or a header and binary data. */
function readInferBody(body: RawBody, headers: Readonly<Record<string, unknown>>) {
  const raw = headers['inference-header-content-length'];
  const header = typeof raw === 'string' ? raw : undefined;
  if (header === undefined) {
    const essence =
      body.contentType === undefined
        ? undefined
        : parseMediaType(body.contentType, 'Content-Type').essence;
    if (essence === 'application/octet-stream') {
      throw new ValidationError(
        'Inference-Header-Content-Length: required with a binary body (the length of its JSON header)',
      );
    }
    // tritonclient sends JSON with no Content-Type: the body is JSON unless it says otherwise.
    if (essence !== undefined && essence !== 'application/json' && !essence.endsWith('+json')) {
      throw new UnsupportedMediaTypeError(
        `Content-Type must be application/json or application/octet-stream (got ${essence})`,
      );
    }
    return { json: jsonBody(body.bytes), binary: undefined };
  }
  const length = Number(header);
  if (!Number.isInteger(length) || length <= 0 || length > body.bytes.length) {
    throw new ValidationError(
      `Inference-Header-Content-Length: ${String(header)} is not a length within the ${body.bytes.length}-byte body`,
    );
  }
  let json: unknown;
  try {
    json = JSON.parse(body.bytes.subarray(0, length).toString('utf8'));
  } catch {
    throw new ValidationError('body: the inference header is not valid JSON');
  }
  return { json, binary: body.bytes.subarray(length) };
}

/** Path parameters of the model routes: the model, and on the /versions/ forms its version. */
type ModelParams = { model: string; version?: string };

const modelParam = z.object({ model: z.string().min(1).max(256) });
const versionParam = modelParam.extend({ version: z.string().min(1).max(64) });

/** A plain JSON answer (200). */
function json(body: unknown): Answer {
  return { kind: 'json', body };
}

/** What `inferenceDefinition` serves: one worker's model, how it answers, and its hooks. */
interface InferenceOptions {
  name: 'edge-infer' | 'cloud-infer';
  model: ServedModel;
  signature: Signature;
  /** The outputs this worker answers with, in order. */
  served: readonly TensorSpec[];
  maxBatch: number;
  answer: Answerer;
  consumes: string;
  readiness: readonly ReadinessCheck[];
  onAnswered?: (answered: Answered) => void;
  /** Where replicas share event answers (event-answers.ts); without it, per process. */
  sharedAnswers?: AnswerOnce;
  /** Routes of this worker alone. */
  extraRoutes?: readonly HttpRoute[];
}

/**
 * One worker's model as its routes and its CloudEvent form see it: built once per definition,
 * so the routes' handlers call its methods instead of closing over a long function's locals.
 */
class ServedInference {
  /** What parseInferRequest checks a request against. */
  private readonly parsing: {
    signature: Signature;
    served: readonly TensorSpec[];
    maxBatch: number;
  };
  /** The model as its metadata, config and infer answers describe it. */
  private readonly described: ServedModel & { signature: Signature; served: readonly TensorSpec[] };
  // A redelivered event (same source and id) gets the first delivery's answer instead of a
  // second inference: counted once, answered the same (across replicas with `sharedAnswers`).
  private readonly once: AnswerOnce;

  constructor(private readonly options: InferenceOptions) {
    const { model, signature, served } = options;
    this.parsing = { signature, served, maxBatch: options.maxBatch };
    this.described = { ...model, signature, served };
    this.once = localAnswers(options.sharedAnswers);
  }

  /** 404 for a model, or a version of it, that this worker does not serve. */
  checkModel(params: ModelParams): void {
    const { model } = this.options;
    if (params.model !== model.name) {
      throw new NotFoundError(
        `model ${params.model} is not served here (this worker serves ${model.name})`,
      );
    }
    if (params.version !== undefined && params.version !== model.version) {
      throw new NotFoundError(
        `model ${model.name} has no version ${params.version} here (served: ${model.version})`,
      );
    }
  }

  /** The worker's answer to a parsed request, reported to `onAnswered`. */
  async run(request: InferRequest, traceparent: string): Promise<Record<string, Tensor>> {
    const { tensors, answered } = await this.options.answer(request, traceparent);
    this.options.onAnswered?.(answered);
    return tensors;
  }

  /** An OIP request's answer, formatted as the protocol writes it (JSON header, binary rest). */
  async infer(request: InferRequest, traceparent: string): Promise<InferAnswer> {
    return formatInferResponse(request, this.described, await this.run(request, traceparent));
  }

  /** POST /v2/models/{model}[/versions/{version}]/infer: JSON or binary tensor data. */
  async inferHttp(
    params: ModelParams,
    body: RawBody,
    ctx: { headers: Readonly<Record<string, unknown>>; traceparent: string },
  ): Promise<Answer> {
    let answer: InferAnswer;
    try {
      this.checkModel(params);
      if (body.bytes.length > largeBodyBytes) await largeWork();
      const { json: header, binary } = readInferBody(body, ctx.headers);
      // Binary floats are checked for finiteness by the inference thread (finite.ts).
      const request = parseInferRequest(header, this.parsing, binary, { deferFinite: true });
      answer = await this.infer(request, ctx.traceparent);
    } finally {
      // Binary inputs are views of the body: once the answer is made (the pool copied them to
      // its thread, and whatever the worker keeps longer is a copy; joint.ts), its memory can
      // serve the next large body (body.ts).
      releaseBody(body.bytes);
    }
    const head = Buffer.from(answer.header);
    if (answer.binary === undefined) {
      return { kind: 'bytes', contentType: 'application/json', body: head };
    }
    return {
      kind: 'bytes',
      contentType: 'application/octet-stream',
      headers: { 'inference-header-content-length': String(head.length) },
      body: Buffer.concat([head, answer.binary]),
    };
  }

  /** POST /predict: the instances form. */
  async predict(body: unknown, traceparent: string): Promise<Answer> {
    const { signature, served, maxBatch } = this.options;
    const request = parseInstances(body, signature, maxBatch);
    return json(formatPredictions(served, await this.run(request, traceparent), request.rows));
  }

  /** An event's data answered: the instances form, or an OIP request answered as JSON. */
  async inferEvent(data: unknown, traceparent: string): Promise<unknown> {
    if (typeof data === 'object' && data !== null && 'instances' in data) {
      const request = parseInstances(data, this.options.signature, this.options.maxBatch);
      return formatPredictions(
        this.options.served,
        await this.run(request, traceparent),
        request.rows,
      );
    }
    const request = parseInferRequest(data, this.parsing);
    if (request.binaryOutputs.size > 0) {
      throw new ValidationError(
        'data: binary outputs (binary_data_output, binary_data) are for HTTP requests; CloudEvent answers are JSON',
      );
    }
    return JSON.parse((await this.infer(request, traceparent)).header) as unknown;
  }

  /** The consumed event's reply, inference.completed, answered once per event (see `once`). */
  async reply(data: unknown, event: IncomingEvent, ctx: { traceparent: string }): Promise<Answer> {
    return {
      kind: 'reply',
      event: {
        type: eventTypes.inferenceCompleted,
        ...(event.subject === undefined ? {} : { subject: event.subject }),
        data: await this.once(`${event.source.length}:${event.source}:${event.id}`, () =>
          this.inferEvent(data, ctx.traceparent),
        ),
      },
    };
  }

  /** GET /v2/models/{model}[/versions/{version}]. */
  async metadata(params: ModelParams): Promise<Answer> {
    this.checkModel(params);
    return json(modelMetadata(this.described));
  }

  /** GET /v2/models/{model}[/versions/{version}]/config. */
  async config(params: ModelParams): Promise<Answer> {
    this.checkModel(params);
    return json(modelConfig({ ...this.described, maxBatch: this.options.maxBatch }));
  }

  /** GET /v2/models/{model}[/versions/{version}]/ready. */
  async ready(params: ModelParams): Promise<Answer> {
    this.checkModel(params);
    await this.checkReady();
    return json({ name: this.options.model.name, ready: true });
  }

  /** GET /v2/health/ready: the worker's readiness checks, as /health/readiness runs them. */
  async serverReady(): Promise<Answer> {
    await this.checkReady();
    return json({ ready: true });
  }

  /** A 503 naming the first readiness check that fails. */
  private async checkReady(): Promise<void> {
    for (const probe of this.options.readiness) {
      try {
        await probe.check();
      } catch (err) {
        const reason = err instanceof Error ? err.message : String(err);
        throw new UnavailableError(`not ready: ${probe.name}: ${reason}`);
      }
    }
  }
}

/**
 * The model's threads as a readiness check: it fails while no thread is alive, or every live one
 * has been inside one run for longer than the deadline (pool.ts), so Knative stops sending
 * requests to a replica that cannot answer them.
 */
function threadsReadiness(pool: { health(): PoolHealth }): ReadinessCheck {
  return {
    name: 'inference-threads',
    async check() {
      const health = pool.health();
      if (health.serving > 0) return;
      const last = health.lastFailure === undefined ? '' : `; ${health.lastFailure}`;
      throw new Error(
        health.alive === 0
          ? `no inference thread is alive (${health.restarting} restarting${last})`
          : `all ${health.alive} inference threads are stuck in one run past the deadline`,
      );
    },
  };
}

/** The routes that infer: OIP's infer (also under /versions/{version}) and POST /predict. */
function inferRoutes(serving: ServedInference): HttpRoute[] {
  return [
    onRawRequest({
      method: 'POST',
      path: '/v2/models/:model/infer',
      params: modelParam,
      handle: ({ params, body }, ctx) => serving.inferHttp(params, body, ctx),
    }),
    onRawRequest({
      method: 'POST',
      path: '/v2/models/:model/versions/:version/infer',
      params: versionParam,
      handle: ({ params, body }, ctx) => serving.inferHttp(params, body, ctx),
    }),
    onRequest({
      method: 'POST',
      path: '/predict',
      body: z.unknown(),
      handle: ({ body }, ctx) => serving.predict(body, ctx.traceparent),
    }),
  ];
}

/** OIP's metadata and health routes: server, model (also under /versions/{version}), health. */
function describeRoutes(serving: ServedInference): HttpRoute[] {
  const metadata = ({ params }: { params: ModelParams }) => serving.metadata(params);
  const config = ({ params }: { params: ModelParams }) => serving.config(params);
  const ready = ({ params }: { params: ModelParams }) => serving.ready(params);
  return [
    onRequest({ method: 'GET', path: '/v2', handle: async () => json(serverMetadata) }),
    onRequest({ method: 'GET', path: '/v2/models/:model', params: modelParam, handle: metadata }),
    onRequest({
      method: 'GET',
      path: '/v2/models/:model/versions/:version',
      params: versionParam,
      handle: metadata,
    }),
    onRequest({
      method: 'GET',
      path: '/v2/models/:model/config',
      params: modelParam,
      handle: config,
    }),
    onRequest({
      method: 'GET',
      path: '/v2/models/:model/versions/:version/config',
      params: versionParam,
      handle: config,
    }),
    onRequest({
      method: 'GET',
      path: '/v2/models/:model/ready',
      params: modelParam,
      handle: ready,
    }),
    onRequest({
      method: 'GET',
      path: '/v2/models/:model/versions/:version/ready',
      params: versionParam,
      handle: ready,
    }),
    onRequest({
      method: 'GET',
      path: '/v2/health/live',
      handle: async () => json({ live: true }),
    }),
    onRequest({
      method: 'GET',
      path: '/v2/health/ready',
      handle: () => serving.serverReady(),
    }),
  ];
}

/** edge-infer's and cloud-infer's shared definition: OIP routes, /predict, one event type. */
function inferenceDefinition(options: InferenceOptions): FunctionDefinition {
  const serving = new ServedInference(options);
  return defineFunction({
    name: options.name,
    // The OIP spec's error object, {"error": "<message>"}, on every route: tritonclient prints
    // that string (an object makes its exception unprintable), and a client configured with a
    // base path (http://host/prefix) reaches routes outside /v2 when the path is wrong.
    errorMessageOnly: () => true,
    // Binary tensor data starts right after the JSON header: read it aligned, to use in place.
    alignBodyAt(headers) {
      const length = Number(headers['inference-header-content-length']);
      return Number.isSafeInteger(length) && length > 0 ? length : undefined;
    },
    // A large body is read in its turn, after the small requests that came meanwhile.
    bodyTurn: (headers) =>
      Number(headers['content-length']) > largeBodyBytes ? largeWork() : undefined,
    routes: [...inferRoutes(serving), ...describeRoutes(serving), ...(options.extraRoutes ?? [])],
    events: [
      onEvent({
        type: options.consumes,
        data: z.unknown(),
        replies: [eventTypes.inferenceCompleted],
        handle: ({ data, event }, ctx) => serving.reply(data, event, ctx),
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
  onAnswered?: (answered: Answered) => void;
  sharedAnswers?: AnswerOnce;
  /** The accuracy objective's and the drift test's current figures (quality-report.ts). */
  quality?: () => WorkerQuality;
}): FunctionDefinition {
  const { joint, quality } = options;
  return inferenceDefinition({
    extraRoutes:
      quality === undefined
        ? []
        : [
            // Seed 003's Skew request: the current estimates, as reported upstream.
            onRequest({
              method: 'GET',
              path: '/skew',
              handle: async () => ({ kind: 'json', body: quality() }),
            }),
          ],
    ...(options.onAnswered === undefined ? {} : { onAnswered: options.onAnswered }),
    ...(options.sharedAnswers === undefined ? {} : { sharedAnswers: options.sharedAnswers }),
    name: 'edge-infer',
    model: options.model,
    signature: joint.edge.signature,
    served: jointOutputs(joint.task, joint.outliers !== undefined),
    maxBatch: options.maxBatch,
    async answer(request, traceparent) {
      // The task is read at each request: a hot reload may have swapped the miner, not the task.
      const wantScores = request.outputs?.includes('outlier_score') ?? false;
      const samples = await jointInfer(
        joint,
        request.inputs,
        request.rows,
        traceparent,
        wantScores,
        request.unchecked,
      );
      const tensors = jointTensors(joint.task, samples);
      // Scored for the drift test but not asked for: not answered (the output is by request).
      if (!wantScores) delete tensors['outlier_score'];
      return { tensors, answered: samples };
    },
    consumes: eventTypes.inferenceRequested,
    readiness: options.readiness,
  });
}

/**
 * cloud-infer: the big model. It answers with the model's own outputs and, when its task reads
 * them (classification, detection), the task's outputs too: the edge asks for those.
 */
function cloudInferDefinition(options: {
  model: ServedModel;
  pool: InferencePool;
  task: TaskAdapter;
  maxBatch: number;
  readiness: readonly ReadinessCheck[];
  onAnswered?: (answered: Answered) => void;
}): FunctionDefinition {
  const { pool, task } = options;
  const raw = pool.signature.outputs;
  const extra = task.kind === 'raw' ? [] : task.outputs;
  const served = [...raw.filter((o) => !extra.some((e) => e.name === o.name)), ...extra];
  const cloudTier = { tier: 'cloud' as const, fallback: false };
  return inferenceDefinition({
    ...(options.onAnswered === undefined ? {} : { onAnswered: options.onAnswered }),
    name: 'cloud-infer',
    model: options.model,
    signature: pool.signature,
    served,
    maxBatch: options.maxBatch,
    async answer(request) {
      const tensors = await pool.infer(request.inputs, request.rows, request.unchecked);
      const wanted = (name: string) => request.outputs?.includes(name) ?? true;
      if (extra.some((o) => wanted(o.name))) {
        Object.assign(tensors, task.toTensors(task.fromModel(tensors, request.rows)));
      }
      return { tensors, answered: new Array<typeof cloudTier>(request.rows).fill(cloudTier) };
    },
    consumes: eventTypes.inferenceHardExample,
    readiness: options.readiness,
  });
}

export { edgeInferDefinition, cloudInferDefinition, serverMetadata, threadsReadiness };
export type { ServedModel, Answered };
