/** Heavy-tailed hops: the Lomax draw, how a path carries its tails, and the link draws. */
import { describe, expect, it } from 'vitest';
import { normal, seededRandom } from '../../../../shared/random/index.js';
import { LinkTable, standardLomax } from '../../../../shared/aset/sim/simulation-topology.js';
import { tiny } from '../../../support/aset.js';

const moments = (xs: readonly number[]) => {
  const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
  const sd = Math.sqrt(xs.reduce((a, x) => a + (x - mean) ** 2, 0) / (xs.length - 1));
  return { mean, sd };
};

describe('standardLomax', () => {
  it('has mean 0, deviation 1, a floor just below 0 and a tail far heavier than the normal', () => {
    const uniform = seededRandom(11);
    const shape = 3.5;
    const xs = Array.from({ length: 400_000 }, () => standardLomax(shape, uniform()));
    const { mean, sd } = moments(xs);
    expect(mean).toBeCloseTo(0, 2);
    expect(sd).toBeGreaterThan(0.95);
    expect(sd).toBeLessThan(1.05);
    expect(xs.reduce((a, b) => Math.min(a, b), Infinity)).toBeGreaterThanOrEqual(
      -Math.sqrt((shape - 2) / shape),
    );
    // The normal puts 3.2e-5 beyond 4 deviations; this Lomax about 0.5%.
    const beyond4 = xs.filter((x) => x > 4).length / xs.length;
    expect(beyond4).toBeGreaterThan(0.003);
    expect(beyond4).toBeLessThan(0.01);
  });
});

describe('a topology with a heavy-tailed hop', () => {
  const tailed = tiny('v', true, 1, '{ delayMs: 10, deviationMs: 3, tail: { shape: 3 } }');
  const cloudLink = tailed.schedulers[0]!.links['cloud-0']!;

  it('keeps d and sigma as the sums over the hops, and names the tailed part', () => {
    // access 2 + central office 3 + ISP DC 5 + cloud 10; deviations 1 and 3 in quadrature.
    expect(cloudLink.delayMs).toBe(20);
    expect(cloudLink.deviationMs).toBeCloseTo(Math.sqrt(10), 12);
    expect(cloudLink.tails).toEqual([{ deviationMs: 3, shape: 3 }]);
    // A path over normal hops only has no tails at all (so its topology hashes as before).
    expect('tails' in tailed.schedulers[0]!.links['access-0']!).toBe(false);
  });

  it('draws the link with that mean and deviation, and more often far over d + 2 sigma', () => {
    const links = new LinkTable(tailed);
    const cloud = tailed.workers.find((w) => w.cluster.id === 'cloud-0')!.index;
    const gauss = normal(seededRandom(1));
    const uniform = seededRandom(2);
    const xs = Array.from({ length: 200_000 }, () => links.draw(0, cloud, gauss, uniform));
    const { mean, sd } = moments(xs);
    expect(mean).toBeCloseTo(20, 1);
    expect(sd).toBeGreaterThan(0.95 * Math.sqrt(10));
    expect(sd).toBeLessThan(1.05 * Math.sqrt(10));
    const far = 20 + 4 * Math.sqrt(10);
    expect(xs.filter((x) => x > far).length / xs.length).toBeGreaterThan(0.001);

    const plain = tiny('v', true, 1, '{ delayMs: 10, deviationMs: 3 }');
    const normalLinks = new LinkTable(plain);
    const untouched = seededRandom(3);
    const before = untouched();
    const again = seededRandom(3);
    normalLinks.draw(0, cloud, normal(seededRandom(1)), again);
    // A normal link never takes a tail uniform: the stream is where it was.
    expect(again()).toBe(before);
  });

  it('refuses a tail shape of 2 or less (no finite deviation)', () => {
    expect(() => tiny('v', true, 1, '{ delayMs: 10, deviationMs: 3, tail: { shape: 2 } }')).toThrow(
      /shape must be above 2/,
    );
  });
});
