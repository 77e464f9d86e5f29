/**
 * A strategy's state as text, for the round store: `{"kind":"none"}`, or the server optimizer's
 * moments as `{"kind":"moments","optimizer":...,"m":<base64>,"v":<base64>}` where each base64 is
 * weights.ts's encoding of the float32 tensors. Decoding checks everything weights.ts checks,
 * under the caller's limits, so a corrupt or foreign value is refused rather than trusted.
 */
import { ValidationError } from '../../errors/index.js';
import { decodeWeights, encodeWeights } from '../weights.js';
import type { NamedTensors, Tensor } from '../weights.js';
import type { FedOptKind, Strategy, StrategyState } from './types.js';

/** weights.ts's decode limits (the largest encoding and the most tensors it accepts). */
type DecodeLimits = Parameters<typeof decodeWeights>[1];

const optimizers: readonly FedOptKind[] = ['fedadam', 'fedyogi', 'fedadagrad'];
const base64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

const initialState: StrategyState = { kind: 'none' };

const toBase64 = (tensors: NamedTensors) => Buffer.from(encodeWeights(tensors)).toString('base64');

function encodeState(state: StrategyState): string {
  if (state.kind === 'none') return JSON.stringify({ kind: 'none' });
  return JSON.stringify({
    kind: 'moments',
    optimizer: state.optimizer,
    m: toBase64(state.m),
    v: toBase64(state.v),
  });
}

function tensorsFrom(field: string, text: unknown, limits: DecodeLimits): Map<string, Tensor> {
  if (typeof text !== 'string' || !base64.test(text)) {
    throw new ValidationError(`strategy state: ${field} is not base64`);
  }
  if ((text.length / 4) * 3 > limits.maxBytes + 2) {
    throw new ValidationError(
      `strategy state: ${field} is over the limit of ${limits.maxBytes} bytes`,
    );
  }
  return decodeWeights(new Uint8Array(Buffer.from(text, 'base64')), limits);
}

/** Reads what encodeState wrote; refuses (ValidationError, naming the field) anything else. */
function decodeState(text: string, limits: DecodeLimits): StrategyState {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new ValidationError('strategy state is not valid JSON');
  }
  const s = parsed as Record<string, unknown> | null;
  if (typeof s !== 'object' || s === null)
    throw new ValidationError('strategy state is not an object');
  if (s['kind'] === 'none') return initialState;
  if (s['kind'] !== 'moments') {
    throw new ValidationError(
      `strategy state kind ${JSON.stringify(s['kind'])} is not none or moments`,
    );
  }
  const optimizer = optimizers.find((o) => o === s['optimizer']);
  if (optimizer === undefined) {
    throw new ValidationError(
      `strategy state optimizer ${JSON.stringify(s['optimizer'])} is not one of ${optimizers.join(', ')}`,
    );
  }
  const m = tensorsFrom('m', s['m'], limits);
  const v = tensorsFrom('v', s['v'], limits);
  return { kind: 'moments', optimizer, m, v };
}

/**
 * The length of encodeState's text for `strategy`'s state over `base` (exact: it encodes zero
 * moments of base's shape once), to size the round store's budget. Central DP's is its inner one's.
 */
function stateSize(strategy: Strategy, base: NamedTensors): number {
  const inner = strategy.kind === 'dp-fixed-clipping' ? strategy.inner : strategy;
  if (inner.kind !== 'fedadam' && inner.kind !== 'fedyogi' && inner.kind !== 'fedadagrad') {
    return encodeState(initialState).length;
  }
  const zeros = new Map(
    [...base].map(([name, t]) => [
      name,
      { dims: t.dims, values: new Float32Array(t.values.length) },
    ]),
  );
  const blob = toBase64(zeros).length;
  const frame = JSON.stringify({ kind: 'moments', optimizer: inner.kind, m: '', v: '' });
  return frame.length + 2 * blob;
}

export { initialState, encodeState, decodeState, stateSize };
