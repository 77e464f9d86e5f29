/** The ASET workload: seeded Poisson clients drawing Table I streams. */
import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { durationScaleFor, parseApps } from '../../../../shared/aset/scenario.js';
import {
  Workload,
  constantLambda,
  fallingLambdaPattern,
  randomLambdaSchedule,
  generateStreams,
  lambdaAt,
  queriesOf,
  burstLambdaPattern,
} from '../../../../research/aset/sim/workload.js';
import type { LambdaSchedule, WorkloadOptions } from '../../../../research/aset/sim/workload.js';

const apps = parseApps(
  await readFile(new URL('../../../../data/aset/apps.yaml', import.meta.url), 'utf8'),
);
const schedulers = ['ap-0', 'ap-1', 'ap-2', 'ap-3'];

function options(lambda: LambdaSchedule, seed = 7, aps = schedulers): WorkloadOptions {
  return { apps, schedulers: aps, lambda, durationScale: durationScaleFor(apps), seed };
}

describe('Workload', () => {
  it('replays the same streams for the same seed, and others for another', () => {
    const a = generateStreams(options(constantLambda(60)), 120_000);
    const b = generateStreams(options(constantLambda(60)), 120_000);
    const c = generateStreams(options(constantLambda(60), 8), 120_000);
    expect(a.length).toBeGreaterThan(300);
    expect(b).toEqual(a);
    expect(c.map((x) => x.atMs)).not.toEqual(a.map((x) => x.atMs));
    // Lazily generated in time order, ids counting arrivals.
    expect(a.map((x) => x.stream.id)).toEqual(a.map((_, i) => i));
    for (let i = 1; i < a.length; i += 1) expect(a[i]!.atMs).toBeGreaterThanOrEqual(a[i - 1]!.atMs);
  });

  it('keeps each access point independent of the others', () => {
    // ap-0's arrivals do not change when more access points generate alongside it.
    const alone = generateStreams(options(constantLambda(60), 7, ['ap-0']), 300_000);
    const shared = generateStreams(options(constantLambda(60)), 300_000).filter(
      (x) => x.stream.scheduler === 'ap-0',
    );
    expect(shared.map((x) => ({ ...x.stream, id: 0 }))).toEqual(
      alone.map((x) => ({ ...x.stream, id: 0 })),
    );
  });

  it('draws Poisson arrivals at lambda clients per minute per access point', () => {
    const arrivals = generateStreams(options(constantLambda(60), 11), 3_600_000);
    // 4 access points x 60/min x 60 min: mean 14,400, sd 120; allow 4 sd.
    expect(Math.abs(arrivals.length - 14_400)).toBeLessThan(480);
    // Index of dispersion over one-minute bins of one access point: chi-square with 59 dof
    // (mean 59, sd 10.9) for a Poisson process; a regular or bursty process lands far outside.
    const bins = new Array<number>(60).fill(0);
    for (const { atMs, stream } of arrivals) {
      if (stream.scheduler === 'ap-2') bins[Math.floor(atMs / 60_000)]! += 1;
    }
    const mean = bins.reduce((s, x) => s + x, 0) / bins.length;
    const chi2 = bins.reduce((s, x) => s + (x - mean) ** 2, 0) / mean;
    expect(chi2).toBeGreaterThan(25);
    expect(chi2).toBeLessThan(100);
  });

  it('follows a piecewise-constant lambda schedule', () => {
    expect(burstLambdaPattern.slice(0, 4)).toEqual([
      { fromS: 0, lambda: 20 },
      { fromS: 150, lambda: 60 },
      { fromS: 300, lambda: 100 },
      { fromS: 450, lambda: 20 },
    ]);
    expect(
      [0, 150, 300, 450, 600, 750, 900, 5000].map((t) => lambdaAt(fallingLambdaPattern, t)),
    ).toEqual([60, 40, 20, 30, 40, 50, 60, 60]);
    const arrivals = generateStreams(options(burstLambdaPattern, 3), 450_000);
    const count = (from: number, to: number) =>
      arrivals.filter((x) => x.atMs >= from * 1000 && x.atMs < to * 1000).length;
    // 4 APs x 2.5 min x (20, 60, 100)/min: means 200, 600, 1000; allow 5 sd.
    for (const [from, mean] of [
      [0, 200],
      [150, 600],
      [300, 1000],
    ] as const) {
      expect(Math.abs(count(from, from + 150) - mean)).toBeLessThan(5 * Math.sqrt(mean));
    }
    const pause = generateStreams(
      options([
        { fromS: 0, lambda: 60 },
        { fromS: 10, lambda: 0 },
        { fromS: 20, lambda: 60 },
      ]),
      30_000,
    );
    expect(pause.filter((x) => x.atMs >= 10_000 && x.atMs < 20_000)).toEqual([]);
    expect(pause.filter((x) => x.atMs >= 20_000).length).toBeGreaterThan(0);
    const stopped = new Workload(options([{ fromS: 0, lambda: 0 }]));
    expect(stopped.peekMs()).toBe(Infinity);
    expect(() => stopped.next()).toThrow('no further arrivals');
    expect(() => new Workload(options([{ fromS: 5, lambda: 60 }]))).toThrow('fromS = 0');
  });

  it("draws every app uniformly and each stream's figures within the app's ranges", () => {
    const scale = durationScaleFor(apps);
    const arrivals = generateStreams(options(constantLambda(60), 5), 1_200_000);
    const seen = new Map<string, number>();
    for (const { stream } of arrivals) {
      const app = apps.find((a) => a.name === stream.app)!;
      seen.set(app.name, (seen.get(app.name) ?? 0) + 1);
      const within = (x: number, [lo, hi]: readonly [number, number]) => {
        expect(x).toBeGreaterThanOrEqual(lo);
        expect(x).toBeLessThanOrEqual(hi);
      };
      within(stream.rate, app.frameRateFps);
      within(stream.maxDelayMs, app.maxDelayMs);
      within(stream.durationS / scale, app.durationS);
      within(stream.size, app.sizeRange);
      within(stream.transmissionMsPerSize, app.transmissionMsPerSize);
      within(stream.accessDelayMs, app.accessDelayMs);
      expect(stream.minAccuracy).toBe(app.minAccuracy);
      expect(stream.task).toBe('object-detection');
      expect(queriesOf(stream)).toBe(Math.max(1, Math.round(stream.durationS * stream.rate)));
    }
    expect(seen.size).toBe(10);
    // ~480 streams per app; each share within 5 sd of a tenth.
    for (const count of seen.values()) {
      expect(Math.abs(count - arrivals.length / 10)).toBeLessThan(
        5 * Math.sqrt(arrivals.length * 0.09),
      );
    }
  });
});

describe('randomLambdaSchedule', () => {
  it('draws integer lambdas and step lengths in range, the same for a seed, new for another', () => {
    const schedule = randomLambdaSchedule(7, { untilS: 3600 });
    checkScheduleShape(schedule);
    for (const [i, step] of schedule.entries()) {
      expect(Number.isInteger(step.lambda)).toBe(true);
      expect(step.lambda).toBeGreaterThanOrEqual(20);
      expect(step.lambda).toBeLessThanOrEqual(100);
      const next = schedule[i + 1];
      if (next !== undefined) {
        expect(next.fromS - step.fromS).toBeGreaterThanOrEqual(60);
        expect(next.fromS - step.fromS).toBeLessThanOrEqual(300);
      }
    }
    expect(schedule.at(-1)!.fromS).toBeLessThan(3600);
    expect(randomLambdaSchedule(7)).toEqual(schedule);
    expect(randomLambdaSchedule(8)).not.toEqual(schedule);
    // Spread over the range, not stuck at one end (an hour holds 12-60 steps).
    const lambdas = schedule.map((s) => s.lambda);
    expect(Math.max(...lambdas) - Math.min(...lambdas)).toBeGreaterThan(40);
  });

  it('refuses an empty or inverted range', () => {
    expect(() => randomLambdaSchedule(1, { lambda: [60, 20] })).toThrow(RangeError);
    expect(() => randomLambdaSchedule(1, { stepS: [0, 10] })).toThrow(RangeError);
  });
});

/** A schedule the workload accepts: starts at 0, strictly increasing steps. */
function checkScheduleShape(schedule: LambdaSchedule): void {
  expect(schedule[0]!.fromS).toBe(0);
  for (let i = 1; i < schedule.length; i += 1)
    expect(schedule[i]!.fromS).toBeGreaterThan(schedule[i - 1]!.fromS);
}
