/**
 * W3C Trace Context: each request gets a span of its own in the caller's trace (or a new trace
 * when the caller sent none or a malformed one, which the spec says to ignore, not reject).
 */
import { randomBytes } from 'node:crypto';

const pattern = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
const zeroTrace = '0'.repeat(32);
const zeroSpan = '0'.repeat(16);

interface Span {
  traceId: string;
  /** traceparent naming this request's span, for replies and outgoing calls. */
  traceparent: string;
}

/** Starts this request's span under `header`'s trace, or a fresh trace. */
function startSpan(header: string | string[] | undefined): Span {
  const match = typeof header === 'string' ? pattern.exec(header) : null;
  let traceId = match?.[1];
  let flags = match?.[3] ?? '01';
  if (traceId === undefined || traceId === zeroTrace || match?.[2] === zeroSpan) {
    traceId = randomBytes(16).toString('hex');
    flags = '01';
  }
  return { traceId, traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-${flags}` };
}

export { startSpan };
export type { Span };
