/**
 * The router function in graph mode (MLGRAPH_GRAPH set): the graph's entry. `POST /predict` and
 * `POST /v2/models/<graph>/infer` take one request (JSON, or OIP binary tensors) and answer with
 * the graph's answer, `mlgraph-puid`, the nodes that answered (`mlgraph-nodes`) and any skipped
 * by a Soft failure (`mlgraph-skipped`); `POST /reward` takes `{puid, reward}` and passes it to
 * every router the prediction went through. As CloudEvents: `io.edgeai.mlgraph.predict` in,
 * `io.edgeai.mlgraph.completed` out; `io.edgeai.mlgraph.reward`.
 */
import { z } from 'zod';
import { NotFoundError } from '../errors/index.js';
import { eventTypes } from '../events/index.js';
import { defineFunction, onEvent, onRawRequest, onRequest } from '../http/index.js';
import type { Answer, FunctionDefinition, ReadinessCheck, RequestContext } from '../http/index.js';
import { extensions, headers as names, parseMetadata, puid, reward } from '../messages/mlgraph.js';
import { headerOutlier, headerTimeout, outlierHeader } from './executor.js';
import type { Executor, Prediction } from './executor.js';
import { asJson, jsonPayload, payloadOf } from './payload.js';
import type { Payload } from './payload.js';
import { eventPuid } from './router-definition.js';

const timeoutMs = z
  .string()
  .regex(/^\d{1,9}$/, 'must be a whole number of milliseconds')
  .transform(Number);

function single(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function answerOf(prediction: Prediction): Answer {
  const headers: Record<string, string> = {
    [names.puid]: prediction.puid,
    'mlgraph-nodes': prediction.ran.join(','),
    ...(prediction.skipped.length === 0 ? {} : { 'mlgraph-skipped': prediction.skipped.join(',') }),
    ...(prediction.partial ? { 'mlgraph-partial': 'true' } : {}),
    ...(prediction.outliers.length === 0
      ? {}
      : {
          [headerOutlier]: outlierHeader(prediction.outliers),
          'mlgraph-outlier': String(prediction.outliers.some((o) => o.outlier)),
        }),
  };
  const { answer } = prediction;
  // The bytes as the last node sent them, when they came from one.
  if (answer.kind === 'json' && answer.raw !== undefined)
    return { kind: 'bytes', contentType: 'application/json', body: answer.raw, headers };
  if (answer.kind === 'json') return { kind: 'json', body: answer.value, headers };
  return {
    kind: 'bytes',
    contentType: answer.contentType,
    body: answer.bytes,
    headers: { ...headers, 'inference-header-content-length': String(answer.headerLength) },
  };
}

/** The event forms: a predict event answered by a completed event, and rewards. */
function graphEvents(deps: { name: string; executor: Executor }) {
  const { executor } = deps;
  return [
    onEvent({
      type: eventTypes.graphPredict,
      data: z.unknown(),
      replies: [eventTypes.graphCompleted],
      async handle({ data, event }, ctx) {
        // A redelivered event keeps its source and id, hence its prediction id and its path.
        const given =
          parseMetadata(puid.optional(), event.extensions[extensions.puid], extensions.puid) ??
          eventPuid(event.source, event.id);
        const prediction = await executor.predict(jsonPayload(data), {
          puid: given,
          traceparent: ctx.traceparent,
        });
        return {
          kind: 'reply',
          event: {
            type: eventTypes.graphCompleted,
            // Fixed per prediction: the answer to a redelivered request is the same event.
            id: `${deps.name}:${prediction.puid}:completed`,
            subject: prediction.puid,
            data: asJson(prediction.answer),
            extensions: { [extensions.puid]: prediction.puid },
          },
        };
      },
    }),
    onEvent({
      type: eventTypes.graphReward,
      data: reward,
      async handle({ data }) {
        await executor.reward(data.puid, data.reward);
        return { kind: 'accepted' };
      },
    }),
  ];
}

function graphDefinition(deps: {
  /** The graph's name: its OIP model name. */
  name: string;
  executor: Executor;
  readiness: readonly ReadinessCheck[];
}): FunctionDefinition {
  const { executor } = deps;
  async function predict(payload: Payload, ctx: RequestContext): Promise<Answer> {
    const prediction = await executor.predict(payload, {
      puid: parseMetadata(puid.optional(), ctx.headers[names.puid], names.puid),
      traceparent: ctx.traceparent,
      timeoutMs: parseMetadata(timeoutMs.optional(), ctx.headers[headerTimeout], headerTimeout),
    });
    return answerOf(prediction);
  }
  const fromBody = (
    body: { bytes: Buffer; contentType: string | undefined },
    ctx: RequestContext,
  ) =>
    payloadOf(body.bytes, body.contentType, single(ctx.headers['inference-header-content-length']));
  return defineFunction({
    name: 'router',
    routes: [
      onRawRequest({
        method: 'POST',
        path: '/predict',
        handle: ({ body }, ctx) => predict(fromBody(body, ctx), ctx),
      }),
      onRawRequest({
        method: 'POST',
        path: '/v2/models/:model/infer',
        params: z.object({ model: z.string() }),
        async handle({ params, body }, ctx) {
          if (params.model !== deps.name)
            throw new NotFoundError(`model ${params.model}: this graph is served as ${deps.name}`);
          return predict(fromBody(body, ctx), ctx);
        },
      }),
      onRequest({
        method: 'POST',
        path: '/reward',
        body: reward,
        async handle({ body }) {
          return { kind: 'json', body: await executor.reward(body.puid, body.reward) };
        },
      }),
    ],
    events: graphEvents(deps),
    readiness: deps.readiness,
    errorMessageOnly: (path) => path.startsWith('/v2/'),
  });
}

export { graphDefinition };
