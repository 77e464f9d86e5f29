/** FedBuff's pure half: staleness weights, the refusal and its reason, the buffered step. */
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../../../shared/errors/index.js';
import {
  bufferedStep,
  checkStaleness,
  modelDelta,
  stalenessWeight,
} from '../../../../shared/fl/strategy/fedbuff.js';
import type { BufferedUpdate } from '../../../../shared/fl/strategy/fedbuff.js';
import { seededRandom, shuffle } from '../../../../shared/random/index.js';
import { bytesOf, expectClose, model, update } from './support.js';

describe('stalenessWeight', () => {
  it("is 1 for constant and (1 + s)^-a for polynomial, FedBuff's 1 / sqrt(1 + s) by default", () => {
    expect(stalenessWeight(7, { kind: 'constant' })).toBe(1);
    const fedbuff = { kind: 'polynomial' } as const;
    expect(stalenessWeight(0, fedbuff)).toBe(1);
    expect(Math.abs(stalenessWeight(3, fedbuff) - 0.5)).toBeLessThan(1e-12);
    expect(Math.abs(stalenessWeight(2, fedbuff) - 0.5773502692)).toBeLessThan(1e-9);
    expect(Math.abs(stalenessWeight(4, { kind: 'polynomial', a: 1 }) - 0.2)).toBeLessThan(1e-12);
    expect(stalenessWeight(9, { kind: 'polynomial', a: 0 })).toBe(1);
  });

  it('refuses a negative or fractional staleness and a bad exponent', () => {
    expect(() => stalenessWeight(-1, { kind: 'constant' })).toThrow(
      'staleness -1 is not an integer >= 0',
    );
    expect(() => stalenessWeight(1.5, { kind: 'constant' })).toThrow(
      'staleness 1.5 is not an integer >= 0',
    );
    expect(() => stalenessWeight(1, { kind: 'polynomial', a: -1 })).toThrow(
      'staleness exponent a -1 is not a finite number >= 0',
    );
  });
});

describe('checkStaleness', () => {
  it('returns the staleness up to the maximum and refuses beyond it with the reason', () => {
    expect(checkStaleness(10, 10, 5)).toBe(0);
    expect(checkStaleness(5, 10, 5)).toBe(5);
    expect(() => checkStaleness(3, 10, 5)).toThrow(ValidationError);
    expect(() => checkStaleness(3, 10, 5)).toThrow(
      'update on version 3 is 7 versions stale; max 5',
    );
    expect(() => checkStaleness(11, 10, 5)).toThrow(
      "update on version 11 is ahead of the model's version 10",
    );
    expect(() => checkStaleness(1, 2, -1)).toThrow('maxStaleness -1 is not an integer >= 0');
  });
});

describe('bufferedStep', () => {
  const base = model({ w: [1, 2] });
  const policy = { kind: 'polynomial' } as const;
  const buffered: BufferedUpdate[] = [
    { worker: 'a', version: 10, samples: 1, delta: model({ w: [1, 0] }) },
    { worker: 'b', version: 8, samples: 3, delta: model({ w: [0, 4] }) },
  ];

  it('steps by serverLr * sum s(staleness) samples delta / sum samples (hand-computed)', () => {
    const out = bufferedStep({
      base,
      version: 10,
      buffered,
      serverLr: 0.5,
      policy,
      maxStaleness: 5,
    });
    // a: staleness 0, weight 1; b: staleness 2, weight 1 / sqrt(3) = 0.5773502692.
    // 0.5 * (1 * 1 * [1 0] + 0.5773502692 * 3 * [0 4]) / 4 = [0.125 0.8660254038].
    expectClose(out.weights, { w: [1.125, 2.8660254038] });
    expect(out.applied.map(({ weight, ...rest }) => rest)).toEqual([
      { worker: 'a', version: 10, staleness: 0 },
      { worker: 'b', version: 8, staleness: 2 },
    ]);
    expect(Math.abs(out.applied[1]!.weight - 0.5773502692)).toBeLessThan(1e-9);
    // Constant weights and serverLr 1, all fresh: FedAvg of base + delta.
    const fresh = buffered.map((u) => ({ ...u, version: 10 }));
    const avg = bufferedStep({
      base,
      version: 10,
      buffered: fresh,
      serverLr: 1,
      policy: { kind: 'constant' },
      maxStaleness: 0,
    });
    // [1 2] + (1 * [1 0] + 3 * [0 4]) / 4 = [1.25 5].
    expectClose(avg.weights, { w: [1.25, 5] });
  });

  it('takes one worker on two versions, is independent of arrival order', () => {
    const uniform = seededRandom(3);
    const many: BufferedUpdate[] = [
      ...buffered,
      { worker: 'a', version: 9, samples: 2, delta: model({ w: [0.3, -0.7] }) },
      { worker: 'c', version: 7, samples: 5, delta: model({ w: [-0.1, 0.2] }) },
    ];
    const step = (list: BufferedUpdate[]) =>
      bytesOf(
        bufferedStep({ base, version: 10, buffered: list, serverLr: 1, policy, maxStaleness: 5 })
          .weights,
      );
    const first = step(many);
    for (let trial = 0; trial < 4; trial += 1)
      expect(step(shuffle([...many], uniform)).equals(first)).toBe(true);
  });

  it('refuses a stale, repeated or misfit contribution, an empty buffer and a bad serverLr', () => {
    const run = (list: BufferedUpdate[], serverLr = 1) =>
      bufferedStep({ base, version: 10, buffered: list, serverLr, policy, maxStaleness: 1 });
    expect(() => run(buffered)).toThrow('update on version 8 is 2 versions stale; max 1');
    const fresh = buffered[0]!;
    expect(() => run([fresh, fresh])).toThrow('a (version 10) is buffered twice');
    expect(() => run([{ ...fresh, delta: model({ w: [1] }) }])).toThrow(
      /worker a \(version 10\): tensor w has dims \[1\]/,
    );
    expect(() => run([])).toThrow('no buffered updates to apply');
    expect(() => run([fresh], 0)).toThrow('serverLr 0 is not a finite number > 0');
    expect(() => run([{ ...fresh, samples: 0 }])).toThrow(
      'the buffered updates hold zero samples in total',
    );
  });
});

describe('modelDelta', () => {
  it('is the update minus the version it started from', () => {
    const start = model({ w: [1, 2], b: [0.5] });
    expectClose(modelDelta(start, update('a', 3, { w: [1.5, 1], b: [0.25] })), {
      w: [0.5, -1],
      b: [-0.25],
    });
    expect(() => modelDelta(start, update('a', 3, { w: [1, 1] }))).toThrow(
      'worker a: tensor b is missing',
    );
  });
});
