/**
 * Async offload: hard samples leave as `io.edgeai.inference.hard-example` CloudEvents (binary
 * mode, an OIP request with JSON data as the event's data) to K_SINK, the address a Knative
 * SinkBinding injects (the Broker). cloud-infer consumes them and replies `inference.completed`
 * into the Broker.
 */
import { randomUUID } from 'node:crypto';
import { createEventSink, eventTypes } from '../events/index.js';
import { createHttpClient, sinkPost } from '../http/index.js';
import { inferRequestJson } from './protocol.js';
import type { Tensor } from './tensor.js';

function createHardExampleSink(options: { url: string; source: string; attempts: number }) {
  const sink = createEventSink({ ...options, post: sinkPost(createHttpClient().send) });
  return async (
    inputs: Readonly<Record<string, Tensor>>,
    _rows: number,
    traceparent: string | undefined,
  ) => {
    const id = randomUUID();
    await sink({
      id,
      type: eventTypes.inferenceHardExample,
      data: inferRequestJson({ id, inputs }),
      ...(traceparent === undefined ? {} : { traceparent }),
    });
  };
}

export { createHardExampleSink };
