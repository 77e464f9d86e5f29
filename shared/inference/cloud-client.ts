/**
 * The edge's synchronous offload: hard samples POSTed to the cloud worker's OIP endpoint under
 * one deadline for all attempts, bounded retries, and a circuit breaker so a dead cloud costs
 * nothing per request once it is known dead (the breaker tries again after `halfOpenMs`).
 */
import {
  BrokenCircuitError,
  ConsecutiveBreaker,
  ConstantBackoff,
  TimeoutStrategy,
  circuitBreaker,
  handleWhen,
  retry,
  timeout,
  wrap,
} from 'cockatiel';
import { UnavailableError } from '../errors/index.js';

interface CloudClient {
  /** Class probabilities for `rows` samples, or an UnavailableError saying why not. */
  infer(input: Float32Array, rows: number, traceparent?: string): Promise<Float32Array>;
  breakerState(): 'closed' | 'open' | 'half-open' | 'isolated';
}

interface CloudClientOptions {
  /** Base URL of the cloud worker. */
  url: string;
  model: string;
  /** Input features per sample, output values per sample. */
  inputWidth: number;
  outputWidth: number;
  deadlineMs: number;
  /** Attempts after the first. */
  retries: number;
  breakerFailures: number;
  halfOpenMs: number;
  send?: typeof fetch;
}

function parseOutput(body: unknown, rows: number, width: number): Float32Array {
  const outputs = (body as { outputs?: Array<{ name?: unknown; data?: unknown }> } | null)?.outputs;
  const data = outputs?.find((o) => o.name === 'probabilities')?.data;
  if (
    !Array.isArray(data) ||
    data.length !== rows * width ||
    !data.every((v) => typeof v === 'number')
  ) {
    throw new Error(`malformed answer: expected ${rows * width} probabilities`);
  }
  return Float32Array.from(data);
}

function createCloudClient(options: CloudClientOptions): CloudClient {
  const send = options.send ?? fetch;
  const endpoint = new URL(
    `v2/models/${encodeURIComponent(options.model)}/infer`,
    options.url.endsWith('/') ? options.url : `${options.url}/`,
  );
  const breaker = circuitBreaker(
    handleWhen((err) => !(err instanceof BrokenCircuitError)),
    {
      halfOpenAfter: options.halfOpenMs,
      breaker: new ConsecutiveBreaker(options.breakerFailures),
    },
  );
  const policy = wrap(
    timeout(options.deadlineMs, TimeoutStrategy.Aggressive),
    retry(
      handleWhen((err) => !(err instanceof BrokenCircuitError)),
      {
        maxAttempts: options.retries,
        backoff: new ConstantBackoff(10),
      },
    ),
    breaker,
  );
  const states = ['closed', 'open', 'half-open', 'isolated'] as const;
  return {
    async infer(input, rows, traceparent) {
      const body = JSON.stringify({
        inputs: [
          {
            name: 'input',
            shape: [rows, options.inputWidth],
            datatype: 'FP32',
            data: Array.from(input),
          },
        ],
      });
      try {
        return await policy.execute(async ({ signal }) => {
          const response = await send(endpoint, {
            method: 'POST',
            headers: {
              'content-type': 'application/json',
              ...(traceparent === undefined ? {} : { traceparent }),
            },
            body,
            signal,
          });
          if (!response.ok) throw new Error(`cloud answered ${response.status}`);
          return parseOutput(await response.json(), rows, options.outputWidth);
        });
      } catch (err) {
        const why =
          err instanceof BrokenCircuitError
            ? 'circuit open after repeated failures'
            : err instanceof Error
              ? err.message
              : String(err);
        throw new UnavailableError(`cloud worker unavailable: ${why}`, 1, { cause: err });
      }
    },
    breakerState: () => states[breaker.state] ?? 'closed',
  };
}

export { createCloudClient };
export type { CloudClient, CloudClientOptions };
