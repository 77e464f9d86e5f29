/**
 * The edge's synchronous offload: hard samples POSTed to the cloud worker's OIP endpoint (binary
 * tensors both ways: no number is printed or parsed as text) under
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
import { createHttpClient, endpoint, succeeded } from '../http/index.js';
import type { HttpSend } from '../http/index.js';
import { encodeInferRequest, parseInferResponse } from './protocol.js';
import type { Tensor } from './tensor.js';

interface CloudClient {
  /**
   * The cloud worker's `outputs` for these inputs (one request in the binary tensor extension),
   * or an UnavailableError saying why not.
   */
  infer(
    inputs: Readonly<Record<string, Tensor>>,
    outputs: readonly string[],
    traceparent?: string,
  ): Promise<Record<string, Tensor>>;
  breakerState(): 'closed' | 'open' | 'half-open' | 'isolated';
}

interface CloudClientOptions {
  /** Base URL of the cloud worker. */
  url: string;
  model: string;
  deadlineMs: number;
  /** Attempts after the first. */
  retries: number;
  breakerFailures: number;
  halfOpenMs: number;
  /**
   * How the request goes. Default: node:http with keep-alive (shared/http/client.ts): fetch
   * costs more per call on this path, which an offloading edge takes per hard example, and
   * compiles undici's WebAssembly HTTP parser once it is hot, in the middle of traffic.
   */
  send?: HttpSend;
}

function createCloudClient(options: CloudClientOptions): CloudClient {
  const send = options.send ?? createHttpClient().send;
  const inferUrl = endpoint(options.url, `v2/models/${encodeURIComponent(options.model)}/infer`);
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
    async infer(inputs, outputs, traceparent) {
      const { body, headerLength } = encodeInferRequest({ inputs, outputs });
      try {
        return await policy.execute(async ({ signal }) => {
          const answer = await send(inferUrl, {
            method: 'POST',
            headers: {
              'content-type': 'application/octet-stream',
              'inference-header-content-length': String(headerLength),
              ...(traceparent === undefined ? {} : { traceparent }),
            },
            body,
            timeoutMs: options.deadlineMs,
            signal,
          });
          if (!succeeded(answer.status)) throw new Error(`cloud answered ${answer.status}`);
          const length = answer.header('inference-header-content-length');
          const tensors = parseInferResponse(
            answer.body,
            length === undefined ? undefined : Number(length),
          );
          const lacking = outputs.find((name) => tensors[name] === undefined);
          if (lacking !== undefined) throw new Error(`malformed answer: no output ${lacking}`);
          return tensors;
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
