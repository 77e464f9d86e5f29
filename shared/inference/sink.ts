/**
 * Async offload: hard samples leave as `io.edgeai.inference.hard-example` CloudEvents (binary
 * mode, an OIP request as data) to K_SINK, the address a Knative SinkBinding injects (the
 * Broker). cloud-infer consumes them and replies `inference.completed` into the Broker.
 */
import { randomUUID } from 'node:crypto';
import { ExponentialBackoff, handleAll, retry } from 'cockatiel';
import { UnavailableError } from '../errors/index.js';
import { eventTypes } from '../events/index.js';

function createHardExampleSink(options: {
  url: string;
  source: string;
  width: number;
  attempts: number;
  send?: typeof fetch;
}) {
  const send = options.send ?? fetch;
  const policy = retry(handleAll, {
    maxAttempts: options.attempts - 1,
    backoff: new ExponentialBackoff({ initialDelay: 20, maxDelay: 500 }),
  });
  return async (input: Float32Array, rows: number, traceparent: string | undefined) => {
    const id = randomUUID();
    const body = JSON.stringify({
      id,
      inputs: [
        { name: 'input', shape: [rows, options.width], datatype: 'FP32', data: Array.from(input) },
      ],
    });
    try {
      await policy.execute(async () => {
        const response = await send(options.url, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'ce-specversion': '1.0',
            'ce-id': id,
            'ce-source': options.source,
            'ce-type': eventTypes.inferenceHardExample,
            ...(traceparent === undefined ? {} : { traceparent }),
          },
          body,
          signal: AbortSignal.timeout(5000),
        });
        if (!response.ok) throw new Error(`sink answered ${response.status}`);
      });
    } catch (err) {
      throw new UnavailableError(
        `hard-example sink unavailable: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
  };
}

export { createHardExampleSink };
