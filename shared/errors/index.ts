/**
 * The few error classes the project throws, and the single place that maps them to HTTP statuses,
 * so every function answers the same way for the same kind of failure.
 */

/** Base class: `status` is the HTTP answer, `reason` the machine-readable name in the body. */
abstract class AppError extends Error {
  abstract readonly status: number;
  get reason(): string {
    return this.name;
  }
}

/** Input breaks the contract; the message names the field. Never retried by Knative. */
class ValidationError extends AppError {
  override readonly name = 'ValidationError';
  readonly status = 400;
}

/** No or invalid credentials. */
class UnauthorizedError extends AppError {
  override readonly name = 'UnauthorizedError';
  readonly status = 401;
}

/** Authenticated, but not allowed to touch this resource. */
class ForbiddenError extends AppError {
  override readonly name = 'ForbiddenError';
  readonly status = 403;
}

/** The addressed thing does not exist. */
class NotFoundError extends AppError {
  override readonly name = 'NotFoundError';
  readonly status = 404;
}

/** The path exists but not for this method; `allow` lists the methods that work. */
class MethodNotAllowedError extends AppError {
  override readonly name = 'MethodNotAllowedError';
  readonly status = 405;
  constructor(
    message: string,
    readonly allow: readonly string[],
  ) {
    super(message);
  }
}

/** Concurrent modification (resourceVersion, in-flight duplicate); retrying may succeed. */
class ConflictError extends AppError {
  override readonly name = 'ConflictError';
  readonly status = 409;
}

/** Body over the configured limit. */
class PayloadTooLargeError extends AppError {
  override readonly name = 'PayloadTooLargeError';
  readonly status = 413;
}

/** Content type, charset or encoding we do not read. */
class UnsupportedMediaTypeError extends AppError {
  override readonly name = 'UnsupportedMediaTypeError';
  readonly status = 415;
}

/** A dependency (Redis, API server, cloud worker) is down or overloaded: retryable. */
class UnavailableError extends AppError {
  override readonly name = 'UnavailableError';
  readonly status = 503;
  constructor(
    message: string,
    readonly retryAfterSeconds = 1,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/**
 * A step the request depended on (another service) failed: `status` is what that step answered,
 * or 502 when it did not answer and 504 when it answered too late; the message names the step.
 */
class StepError extends AppError {
  override readonly name = 'StepError';
  constructor(
    message: string,
    readonly status: number,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** A configuration variable is missing or malformed; the message names the variable. */
class ConfigError extends AppError {
  override readonly name = 'ConfigError';
  readonly status = 500;
}

/** What a failed request answers: status, headers and a JSON body naming the problem. */
interface ErrorAnswer {
  status: number;
  headers: Record<string, string>;
  body: { error: { status: number; reason: string; message: string } };
}

/**
 * Maps any thrown value to its answer. Anything that is not an AppError is a bug: 500 with a
 * generic message, so internals (and secrets in them) never reach the caller.
 */
function errorAnswer(err: unknown): ErrorAnswer {
  if (!(err instanceof AppError)) {
    return {
      status: 500,
      headers: {},
      body: { error: { status: 500, reason: 'InternalError', message: 'internal error' } },
    };
  }
  const headers: Record<string, string> = {};
  if (err instanceof MethodNotAllowedError) headers['allow'] = err.allow.join(', ');
  if (err instanceof UnavailableError) headers['retry-after'] = String(err.retryAfterSeconds);
  return {
    status: err.status,
    headers,
    body: { error: { status: err.status, reason: err.reason, message: err.message } },
  };
}

export {
  ValidationError,
  UnauthorizedError,
  ForbiddenError,
  NotFoundError,
  MethodNotAllowedError,
  ConflictError,
  PayloadTooLargeError,
  UnsupportedMediaTypeError,
  UnavailableError,
  StepError,
  ConfigError,
  errorAnswer,
};
export type { ErrorAnswer };
