/**
 * A trainer's side of the federated protocol, for trainers written in TypeScript (fl-trainer is
 * one): ask the aggregator where the job stands, download a round's model (on the aggregator's
 * origin only, bounded, checked against its sha256), send an update as a binary-mode CloudEvent
 * and report a failure. Every call is signed as the trainer's node (bearer token and node
 * header) and has a timeout. A call either returns, or throws one of:
 * - AggregatorUnavailableError: the network, a timeout, 404/408/425/429 or a 5xx — retry later;
 * - AggregatorRejectedError: any other refusal (400, 401, 403, 413...) — retrying cannot help;
 * - PayloadTooLargeError (a model over the limit), ModelDigestError (not the bytes the round
 *   names) and ValidationError (a model URL elsewhere, a malformed round status).
 * No message carries weights or training data: only statuses and the aggregator's own words.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { PayloadTooLargeError, ValidationError } from '../errors/index.js';
import { encodeBinary, eventTypes, headerValue } from '../events/index.js';
import { CallTimeoutError, createHttpClient, endpoint, succeeded } from '../http/index.js';
import type { HttpAnswer, HttpCall, HttpSend } from '../http/index.js';
import type { TrainerFailed } from '../messages/federated.js';
import { nodeHeader } from '../messages/worker-message.js';
import { parseInput } from '../schema/index.js';

/** The aggregator could not be reached or could not answer now: retrying may succeed. */
class AggregatorUnavailableError extends Error {
  override readonly name = 'AggregatorUnavailableError';
  constructor(
    message: string,
    /** The HTTP status, or undefined when no answer came. */
    readonly status: number | undefined,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** The aggregator refused the request for good (malformed, unauthenticated, too large...). */
class AggregatorRejectedError extends Error {
  override readonly name = 'AggregatorRejectedError';
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
  }
}

/** The model downloaded is not the one the round names (its sha256 differs). */
class ModelDigestError extends Error {
  override readonly name = 'ModelDigestError';
}

/** `GET /v1/round`: where the job stands, for a trainer that may have missed its round event. */
const roundStatus = z.object({
  job: z.string(),
  round: z.number().int().min(0),
  base: z.number().int().min(0),
  status: z.enum(['open', 'aggregating', 'done', 'failed']),
  selected: z.array(z.string()).default([]),
  submitted: z.array(z.string()).default([]),
  deadline: z.string().optional(),
  /** Checked as a round event's fields when the trainer joins the round. */
  model: z.unknown().optional(),
  training: z.unknown().optional(),
  maxStaleness: z.unknown().optional(),
});
type RoundStatus = z.output<typeof roundStatus>;

interface TrainerClientOptions {
  /** The aggregator's base URL: rounds, updates and failures go there, models come from there. */
  aggregatorUrl: string;
  job: string;
  worker: string;
  /** The node the trainer runs on, and its token (without one, updates carry no credentials). */
  node: string;
  token?: string | undefined;
  /**
   * How every call goes. Default: node:http with keep-alive (shared/http/client.ts), which sends
   * an update's bytes as they are where fetch copies them (0.8 MB per update of the bench's
   * model, fresh memory each time), and does not compile undici's WebAssembly HTTP parser, which
   * took about 80 ms of each trainer's CPU in round 1 once its polls made the parser hot.
   */
  send?: HttpSend;
  /** Each call's timeout but the model download's (default 30 s). */
  timeoutMs?: number;
  /** The model download's timeout, body included (default 5 min). */
  modelTimeoutMs?: number;
}

/** An update as sent: the weights in shared/fl/weights.ts's encoding and what they are. */
interface UpdateToSend {
  round: number;
  /** The model version the round trained from. */
  base: number;
  samples: number;
  loss: number;
  trainMs: number;
  weights: Uint8Array;
}

/** accepted (202), duplicate (200: already counted) or refused (409, with the refusal's name). */
interface UpdateOutcome {
  outcome: 'accepted' | 'duplicate' | 'refused';
  reason?: string;
}

interface TrainerClient {
  currentRound(signal?: AbortSignal): Promise<RoundStatus>;
  fetchModel(
    url: string,
    sha256: string,
    maxBytes: number,
    signal?: AbortSignal,
  ): Promise<Uint8Array>;
  sendUpdate(update: UpdateToSend, signal?: AbortSignal): Promise<UpdateOutcome>;
  reportFailure(failure: TrainerFailed, signal?: AbortSignal): Promise<void>;
}

/** Statuses worth retrying besides the 5xx (as Knative's delivery retries them). */
const retriedStatuses = new Set([404, 408, 425, 429]);

/** Whether `url` has the scheme, host and port of `base` (false for a malformed URL). */
function sameOrigin(url: string, base: string): boolean {
  try {
    return new URL(url).origin === new URL(base).origin;
  } catch {
    return false;
  }
}

const messageOf = (err: unknown) => (err instanceof Error ? err.message : String(err));

const shorten = (text: string, max = 300) =>
  text.length > max ? `${text.slice(0, max)}...` : text;

/** The answer's body as JSON, or undefined (not JSON). */
function jsonBody(answer: HttpAnswer): unknown {
  try {
    return JSON.parse(answer.body.toString('utf8')) as unknown;
  } catch {
    return undefined;
  }
}

const field = (value: unknown, name: string): unknown =>
  typeof value === 'object' && value !== null
    ? (value as Record<string, unknown>)[name]
    : undefined;

/** The aggregator's message in an error body ({error: {message}} or {message}), if any. */
function errorMessage(body: unknown): string | undefined {
  const message = field(field(body, 'error'), 'message') ?? field(body, 'message');
  return typeof message === 'string' ? shorten(message) : undefined;
}

/**
 * A 409's refusal name (late, closed, stale-base, not-selected, finished, future...): the first
 * kebab-case `refusal` or `reason`, at the top or under `error`; else `conflict`.
 */
function refusalOf(body: unknown): string {
  const error = field(body, 'error');
  const candidates = [
    field(body, 'refusal'),
    field(body, 'reason'),
    field(error, 'refusal'),
    field(error, 'reason'),
  ];
  const name = candidates.find((c) => typeof c === 'string' && /^[a-z][a-z-]{0,63}$/.test(c));
  const message = errorMessage(body);
  const refusal = typeof name === 'string' ? name : 'conflict';
  return message === undefined ? refusal : `${refusal}: ${message}`;
}

/** Throws the error a non-2xx answer means, naming the call, status and the aggregator's message. */
function refused(answer: HttpAnswer, what: string): never {
  const { status } = answer;
  const detail = errorMessage(jsonBody(answer));
  const message = `${what}: the aggregator answered ${status}${detail === undefined ? '' : ` (${detail})`}`;
  if (status >= 500 || retriedStatuses.has(status)) {
    throw new AggregatorUnavailableError(message, status);
  }
  throw new AggregatorRejectedError(message, status);
}

/** What every call of one client shares. */
interface Caller {
  readonly options: TrainerClientOptions;
  readonly send: HttpSend;
  readonly timeoutMs: number;
  readonly modelTimeoutMs: number;
  /** Where events go: the aggregator's root. */
  readonly eventsUrl: string;
  /** The CloudEvent source of this trainer's events. */
  readonly source: string;
  /** The node header and, with a token, the bearer token. */
  readonly auth: Readonly<Record<string, string>>;
}

/** The largest answer read from the aggregator but a model (its status, an error): 1 MiB. */
const maxAnswerBytes = 1 << 20;

/**
 * One request under its timeout (the caller's own, else the client's) and the caller's signal:
 * an answer (any status, the body read whole; redirects are answers), or unavailable when none
 * came (or its body is over maxAnswerBytes), or the caller's reason when it gave up, or
 * PayloadTooLargeError past the caller's `maxBytes`.
 */
async function call(
  caller: Caller,
  what: string,
  url: string,
  request: Omit<HttpCall, 'timeoutMs'> & { timeoutMs?: number },
): Promise<HttpAnswer> {
  const { timeoutMs = caller.timeoutMs, maxBytes = maxAnswerBytes, signal } = request;
  try {
    return await caller.send(url, { ...request, timeoutMs, maxBytes });
  } catch (err) {
    if (signal?.aborted === true) throw signal.reason;
    // Over the caller's own limit (a model): its error. Over the default: a misbehaving answer.
    if (err instanceof PayloadTooLargeError && request.maxBytes !== undefined) throw err;
    const why =
      err instanceof CallTimeoutError ? `no answer within ${timeoutMs} ms` : messageOf(err);
    throw new AggregatorUnavailableError(`${what}: ${why}`, undefined, { cause: err });
  }
}

async function currentRound(caller: Caller, signal?: AbortSignal): Promise<RoundStatus> {
  const what = 'round status';
  const url = endpoint(caller.options.aggregatorUrl, 'v1/round');
  const headers = { ...caller.auth, accept: 'application/json' };
  const answer = await call(caller, what, url, { method: 'GET', headers, signal });
  if (!succeeded(answer.status)) return refused(answer, what);
  const json = jsonBody(answer);
  if (json === undefined) throw new ValidationError(`${what}: the aggregator's answer is not JSON`);
  return parseInput(roundStatus, json, what);
}

async function fetchModel(
  caller: Caller,
  model: { url: string; sha256: string; maxBytes: number },
  signal?: AbortSignal,
): Promise<Uint8Array> {
  const { aggregatorUrl } = caller.options;
  if (!sameOrigin(model.url, aggregatorUrl)) {
    throw new ValidationError(
      `model URL ${shorten(model.url)} is not on the aggregator's origin ${new URL(aggregatorUrl).origin}`,
    );
  }
  const what = 'model download';
  const request = {
    method: 'GET',
    headers: caller.auth,
    timeoutMs: caller.modelTimeoutMs,
    maxBytes: model.maxBytes,
    signal,
  } as const;
  const answer = await call(caller, what, model.url, request).catch((err: unknown) => {
    if (!(err instanceof PayloadTooLargeError)) throw err;
    throw new PayloadTooLargeError(err.message.replace(/^the answer/, 'the model'));
  });
  if (!succeeded(answer.status)) return refused(answer, what);
  const got = createHash('sha256').update(answer.body).digest('hex');
  if (got !== model.sha256) {
    throw new ModelDigestError(`the model's sha256 is ${got}, the round names ${model.sha256}`);
  }
  return answer.body;
}

/** The update's binary-mode CloudEvent headers (flUpdateAttributes), signed as the node. */
function updateHeaders(caller: Caller, update: UpdateToSend): Record<string, string> {
  const { job, worker } = caller.options;
  const headers: Record<string, string> = {
    ...caller.auth,
    'content-type': 'application/octet-stream',
    'ce-specversion': '1.0',
    'ce-type': eventTypes.flUpdate,
    'ce-source': headerValue(caller.source),
    // Deterministic: a resend is the same event, which the aggregator counts once.
    'ce-id': headerValue(`${worker}.r${update.round}`),
    'ce-fljob': headerValue(job),
    'ce-flworker': headerValue(worker),
    'ce-flround': String(update.round),
    'ce-flbase': String(update.base),
    'ce-flsamples': String(update.samples),
    'ce-fltrainms': String(Math.max(0, Math.round(update.trainMs))),
  };
  if (Number.isFinite(update.loss) && update.loss >= 0) headers['ce-flloss'] = String(update.loss);
  return headers;
}

async function sendUpdate(
  caller: Caller,
  update: UpdateToSend,
  signal?: AbortSignal,
): Promise<UpdateOutcome> {
  const what = `round ${update.round} update`;
  const { weights } = update;
  const answer = await call(caller, what, caller.eventsUrl, {
    method: 'POST',
    headers: updateHeaders(caller, update),
    // A view of the weights' memory, not a copy.
    body: Buffer.from(weights.buffer, weights.byteOffset, weights.byteLength),
    signal,
  });
  if (answer.status === 409) return { outcome: 'refused', reason: refusalOf(jsonBody(answer)) };
  if (!succeeded(answer.status)) return refused(answer, what);
  return { outcome: answer.status === 200 ? 'duplicate' : 'accepted' };
}

async function reportFailure(
  caller: Caller,
  failure: TrainerFailed,
  signal?: AbortSignal,
): Promise<void> {
  const what = 'failure report';
  const { worker } = caller.options;
  // One id per round and exit code: a resent report is the same event.
  const id =
    failure.round === undefined ? undefined : `${worker}.r${failure.round}.x${failure.exitCode}`;
  const event = encodeBinary({
    type: eventTypes.flTrainerFailed,
    source: caller.source,
    data: failure,
    ...(id === undefined ? {} : { id }),
  });
  const headers = { ...event.headers, ...caller.auth };
  const answer = await call(caller, what, caller.eventsUrl, {
    method: 'POST',
    headers,
    body: event.body,
    signal,
  });
  if (!succeeded(answer.status)) return refused(answer, what);
}

/** A client of the aggregator at `options.aggregatorUrl`, as `options.worker` of `options.job`. */
function createTrainerClient(options: TrainerClientOptions): TrainerClient {
  const auth: Record<string, string> = { [nodeHeader]: options.node };
  if (options.token !== undefined) auth['authorization'] = `Bearer ${options.token}`;
  const caller: Caller = {
    options,
    send: options.send ?? createHttpClient().send,
    timeoutMs: options.timeoutMs ?? 30_000,
    modelTimeoutMs: options.modelTimeoutMs ?? 300_000,
    eventsUrl: endpoint(options.aggregatorUrl, ''),
    source: `/fl/${options.job}/trainers/${options.worker}`,
    auth,
  };
  return {
    currentRound: (signal) => currentRound(caller, signal),
    fetchModel: (url, sha256, maxBytes, signal) =>
      fetchModel(caller, { url, sha256, maxBytes }, signal),
    sendUpdate: (update, signal) => sendUpdate(caller, update, signal),
    reportFailure: (failure, signal) => reportFailure(caller, failure, signal),
  };
}

export {
  createTrainerClient,
  sameOrigin,
  AggregatorUnavailableError,
  AggregatorRejectedError,
  ModelDigestError,
};
export type { TrainerClient, TrainerClientOptions, RoundStatus };
