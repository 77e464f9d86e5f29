/**
 * W3C Trace Context: each request gets a span of its own in the caller's trace (or a new trace
 * when the caller sent none or a malformed one, which the spec says to ignore, not reject).
 */
import { randomUUID } from 'node:crypto';

const pattern = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
const zeroTrace = '0'.repeat(32);
const zeroSpan = '0'.repeat(16);

interface Span {
  traceId: string;
  /** traceparent naming this request's span, for replies and outgoing calls. */
  traceparent: string;
}

/** 32 random hex digits. randomUUID draws from a cached entropy pool: much cheaper per call. */
function randomHex32(): string {
  const uuid = randomUUID();
  return (
    uuid.slice(0, 8) + uuid.slice(9, 13) + uuid.slice(14, 18) + uuid.slice(19, 23) + uuid.slice(24)
  );
}

/** Starts this request's span under `header`'s trace, or a fresh trace. */
function startSpan(header: string | string[] | undefined): Span {
  const match = typeof header === 'string' ? pattern.exec(header) : null;
  const spanId = randomHex32().slice(16);
  const traceId = match?.[1];
  if (traceId === undefined || traceId === zeroTrace || match?.[2] === zeroSpan) {
    const fresh = randomHex32();
    return { traceId: fresh, traceparent: `00-${fresh}-${spanId}-01` };
  }
  return { traceId, traceparent: `00-${traceId}-${spanId}-${match?.[3] ?? '01'}` };
}

export { startSpan };
export type { Span };
