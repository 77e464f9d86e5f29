/** The strategy state's text encoding: exact round trip, refusals, and its size. */
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../../../shared/errors/index.js';
import { aggregate } from '../../../../shared/fl/strategy/aggregate.js';
import { fedOptDefaults } from '../../../../shared/fl/strategy/server-opt.js';
import {
  decodeState,
  encodeState,
  initialState,
  stateSize,
} from '../../../../shared/fl/strategy/state.js';
import { bytesOf, model, update } from './support.js';

const limits = { maxBytes: 1 << 20, maxTensors: 16 };
const base = model({ w: [1, 2, 3], b: [0.5] });
const updates = [
  update('a', 2, { w: [1.1, 2.2, 2.9], b: [0.4] }),
  update('b', 1, { w: [0.9, 1.7, 3.3], b: [0.7] }),
];

describe('strategy state', () => {
  it('round-trips the moments bit for bit, and none as none', () => {
    const { state } = aggregate(fedOptDefaults.fedyogi, base, updates, initialState, 1);
    if (state.kind !== 'moments') throw new Error('expected moments');
    const back = decodeState(encodeState(state), limits);
    if (back.kind !== 'moments') throw new Error('expected moments');
    expect(back.optimizer).toBe('fedyogi');
    expect(bytesOf(back.m).equals(bytesOf(state.m))).toBe(true);
    expect(bytesOf(back.v).equals(bytesOf(state.v))).toBe(true);
    expect([...back.m.keys()]).toEqual(['w', 'b']);
    expect(decodeState(encodeState(initialState), limits)).toEqual(initialState);
  });

  it('has the size stateSize predicts (base64 of two float32 copies of the model, and a header)', () => {
    const { state } = aggregate(fedOptDefaults.fedadam, base, updates, initialState, 1);
    expect(stateSize(fedOptDefaults.fedadam, base)).toBe(encodeState(state).length);
    expect(stateSize({ kind: 'krum', f: 1, m: 1 }, base)).toBe(encodeState(initialState).length);
    const dp = {
      kind: 'dp-fixed-clipping',
      noiseMultiplier: 1,
      clippingNorm: 1,
      sampledClients: 2,
      seed: 1,
      inner: fedOptDefaults.fedadagrad,
    } as const;
    expect(stateSize(dp, base)).toBe(
      encodeState(aggregate(dp, base, updates, initialState, 1).state).length,
    );
    // A million parameters: about 2 * 4 MB * 4/3.
    const big = new Map([['w', { dims: [1_000_000], values: new Float32Array(1_000_000) }]]);
    const size = stateSize(fedOptDefaults.fedadam, big);
    expect(size).toBeGreaterThan((2 * 4_000_000 * 4) / 3);
    expect(size).toBeLessThan((2 * 4_000_000 * 4) / 3 + 400);
  });

  it('refuses what it did not write, naming the field', () => {
    const { state } = aggregate(fedOptDefaults.fedadam, base, updates, initialState, 1);
    const good = JSON.parse(encodeState(state)) as Record<string, unknown>;
    const cases: Array<[string, string | RegExp]> = [
      ['{', 'strategy state is not valid JSON'],
      ['null', 'strategy state is not an object'],
      ['{"kind":"other"}', 'strategy state kind "other" is not none or moments'],
      [
        JSON.stringify({ ...good, optimizer: 'sgd' }),
        'strategy state optimizer "sgd" is not one of fedadam, fedyogi, fedadagrad',
      ],
      [JSON.stringify({ ...good, m: 'not base64!' }), 'strategy state: m is not base64'],
      [JSON.stringify({ ...good, v: 7 }), 'strategy state: v is not base64'],
      [
        JSON.stringify({ ...good, m: Buffer.from('EAFWxxxxxxxxxxxxxxxx').toString('base64') }),
        /weights version/,
      ],
    ];
    for (const [text, message] of cases) {
      expect(() => decodeState(text, limits)).toThrow(ValidationError);
      expect(() => decodeState(text, limits)).toThrow(message);
    }
    expect(() => decodeState(encodeState(state), { maxBytes: 40, maxTensors: 16 })).toThrow(
      'strategy state: m is over the limit of 40 bytes',
    );
    expect(() => decodeState(encodeState(state), { maxBytes: 1 << 20, maxTensors: 1 })).toThrow(
      'weights hold 2 tensors, over the limit of 1',
    );
  });
});
