/** Delay spikes on a hop: the Lomax excess, how a path carries them, and the link draws. */
import { describe, expect, it } from 'vitest';
import { normal, seededRandom } from '../../../../shared/random/index.js';
import { LinkTable, lomax } from '../../../../research/aset/sim/simulation-topology.js';
import { tiny } from '../../../support/aset.js';

describe('lomax', () => {
  it('is the Pareto II quantile: median scale (2^(1/shape) - 1), mean scale / (shape - 1)', () => {
    expect(lomax(1.5, 5, 0.5)).toBeCloseTo(5 * (2 ** (1 / 1.5) - 1), 12);
    expect(lomax(1.5, 5, 0)).toBe(0);
    const uniform = seededRandom(11);
    const xs = Array.from({ length: 200_000 }, () => lomax(3, 6, uniform()));
    expect(xs.reduce((a, b) => a + b, 0) / xs.length).toBeCloseTo(3, 1);
    // Heavy: beyond 10 scales with probability 11^-3 = 0.075%, where an exponential of the same
    // mean puts e^-20.
    expect(xs.filter((x) => x > 60).length / xs.length).toBeGreaterThan(0.0004);
  });
});

describe('a topology with a spiky hop', () => {
  const spikes = { probability: 0.1, shape: 1.5, scaleMs: 5 };
  const spiky = tiny(
    'v',
    true,
    1,
    `{ delayMs: 10, deviationMs: 3, spikes: { probability: 0.1, shape: 1.5, scaleMs: 5 } }`,
  );
  const cloud = spiky.workers.find((w) => w.cluster.id === 'cloud-0')!.index;

  it("keeps the nominal d and sigma (what constraint (3) reads) and carries the hop's spikes", () => {
    const link = spiky.schedulers[0]!.links['cloud-0']!;
    // access 2 + central office 3 + ISP DC 5 + cloud 10; deviations 1 and 3 in quadrature.
    expect(link.delayMs).toBe(20);
    expect(link.deviationMs).toBeCloseTo(Math.sqrt(10), 12);
    expect(link.spikes).toEqual([spikes]);
    // A path without spiky hops has no `spikes` key at all (so its topology hashes as before).
    expect('spikes' in spiky.schedulers[0]!.links['access-0']!).toBe(false);
  });

  it('draws N(d, sigma) plus a spike in about p of the crossings, far more often far over budget', () => {
    const links = new LinkTable(spiky);
    const gauss = normal(seededRandom(1));
    const uniform = seededRandom(2);
    const xs = Array.from({ length: 200_000 }, () => links.draw(0, cloud, gauss, uniform));
    const budget = links.budget(0, cloud);
    expect(budget).toBeCloseTo(20 + 2 * Math.sqrt(10), 12);
    // Mean: d + p * scale / (shape - 1) = 20 + 1 ms.
    expect(xs.reduce((a, b) => a + b, 0) / xs.length).toBeCloseTo(21, 0);
    const over = xs.filter((x) => x > budget + 10).length / xs.length;
    // N(0, 10) > 16.3 is 1e-7; a spike over ~16 ms is 0.1 x (1 + 16.3/5)^-1.5 = 1.1%.
    expect(over).toBeGreaterThan(0.008);
    expect(over).toBeLessThan(0.015);

    const plain = tiny('v', true, 1, '{ delayMs: 10, deviationMs: 3 }');
    const before = seededRandom(3)();
    const untouched = seededRandom(3);
    new LinkTable(plain).draw(0, cloud, normal(seededRandom(1)), untouched);
    // A path without spikes never takes a spike uniform: the stream is where it was.
    expect(untouched()).toBe(before);
  });

  it('refuses a spike shape of 1 or less (no finite mean) and a probability above 1', () => {
    const hop = (s: string) => `{ delayMs: 10, deviationMs: 3, spikes: ${s} }`;
    expect(() => tiny('v', true, 1, hop('{ probability: 0.1, shape: 1, scaleMs: 5 }'))).toThrow(
      /shape must be above 1/,
    );
    expect(() => tiny('v', true, 1, hop('{ probability: 2, shape: 1.5, scaleMs: 5 }'))).toThrow();
  });
});
