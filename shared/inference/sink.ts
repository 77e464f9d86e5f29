/**
 * Async offload: hard samples leave as `io.edgeai.inference.hard-example` CloudEvents (binary
 * mode, an OIP request as data) to K_SINK, the address a Knative SinkBinding injects (the
 * Broker). cloud-infer consumes them and replies `inference.completed` into the Broker.
 */
import { randomUUID } from 'node:crypto';
import { createEventSink, eventTypes } from '../events/index.js';

function createHardExampleSink(options: {
  url: string;
  source: string;
  width: number;
  attempts: number;
  send?: typeof fetch;
}) {
  const sink = createEventSink(options);
  return async (input: Float32Array, rows: number, traceparent: string | undefined) => {
    const id = randomUUID();
    await sink({
      id,
      type: eventTypes.inferenceHardExample,
      data: {
        id,
        inputs: [
          {
            name: 'input',
            shape: [rows, options.width],
            datatype: 'FP32',
            data: Array.from(input),
          },
        ],
      },
      ...(traceparent === undefined ? {} : { traceparent }),
    });
  };
}

export { createHardExampleSink };
