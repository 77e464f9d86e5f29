/**
 * The quality window on a real Redis: replicas read one window, a restarted worker resumes from
 * it, a resent delivery counts once, a drift flip resets calibration once however many replicas
 * see it; and shadow sampling is capped and never holds an answer.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bandCount } from '../../../shared/inference/objective.js';
import { createQualityWindow } from '../../../shared/inference/quality-window.js';
import type { QualityWindowOptions } from '../../../shared/inference/quality-window.js';
import { createShadow } from '../../../shared/inference/shadow.js';
import { capturedTelemetry } from '../../support/http.js';
import { testRedis } from '../../support/redis.js';
import type { TestRedis } from '../../support/redis.js';

describe('quality window', () => {
  let redis: TestRedis;
  const log = capturedTelemetry('edge-infer').log;
  beforeAll(async () => {
    redis = await testRedis();
  });
  afterAll(() => redis.close());

  const options = (service: string, reporter: string): QualityWindowOptions => ({
    redis: redis.client,
    service,
    reporter,
    bucketSize: 100,
    buckets: 10,
    driftWindow: 100,
    refreshMs: 0,
    calibration: { objective: 0.01, z: 1, minLabelled: 50 },
    drift: { expectedShare: 0.05, raiseAt: 5, clearAt: 2, minInputs: 50 },
    log,
  });

  /** `n` inputs in `band`, each labelled; `disagree` of them disagreeing; `outliers` flagged. */
  const feed = (
    w: ReturnType<typeof createQualityWindow>,
    band: number,
    n: number,
    disagree: number,
    outliers = 0,
  ) => {
    for (let i = 0; i < n; i += 1) {
      w.observe(band, i < outliers);
      w.label(band, i < disagree ? 1 : 0);
    }
  };

  it('gives replicas one cut and lets a restarted worker resume from it', async () => {
    const a = createQualityWindow(options('ns/shared', 'a'));
    const b = createQualityWindow(options('ns/shared', 'b'));
    expect(a.isHard(0.5)).toBeUndefined();
    // Easy inputs that agree; hard ones that disagree half the time.
    feed(a, 0, 300, 0);
    feed(b, bandCount - 1, 20, 10);
    await a.refresh();
    await b.refresh();
    await a.refresh();
    const cut = a.state().estimate!.cut;
    expect(b.state().estimate!.cut).toBe(cut);
    expect(cut).toBeGreaterThan(0);
    expect(cut).toBeLessThan(bandCount);
    expect(a.isHard(1)).toBe(true);
    expect(a.isHard(0)).toBe(false);
    a.stop();
    const restarted = createQualityWindow(options('ns/shared', 'a2'));
    await restarted.refresh();
    expect(restarted.state().estimate).toEqual(a.state().estimate);
  });

  it('counts a delivery once when its reply was lost and it is resent', async () => {
    const w = createQualityWindow(options('ns/resend', 'r'));
    feed(w, 0, 80, 0);
    // The first send applies but its reply is lost: the client sees an error.
    const realEval = redis.client.evalsha.bind(redis.client);
    let lose = true;
    const patched = redis.client as unknown as { evalsha: typeof realEval };
    patched.evalsha = ((...args: Parameters<typeof realEval>) => {
      const result = realEval(...args);
      if (!lose) return result;
      lose = false;
      return result.then(() => {
        throw new Error('connection reset');
      });
    }) as typeof realEval;
    try {
      await expect(w.refresh()).rejects.toThrow('connection reset');
      await w.refresh(); // resends the same delivery: already applied, not counted again
      await w.refresh(); // an empty delivery reads the window
    } finally {
      patched.evalsha = realEval;
    }
    expect(w.state().estimate!.labelled).toBe(80);
  });

  it('flips the drift state once for all replicas and calibrates from the flip on', async () => {
    const a = createQualityWindow(options('ns/drift', 'a'));
    const b = createQualityWindow(options('ns/drift', 'b'));
    feed(a, 0, 100, 0, 5);
    await a.refresh();
    expect(a.state().drift!.drifting).toBe(false);
    const before = a.state().estimate!.labelled;
    // Half the inputs are outliers: both replicas see it; one flip, one reset.
    feed(a, 0, 100, 0, 50);
    feed(b, 0, 100, 0, 50);
    await Promise.all([a.refresh(), b.refresh()]);
    await Promise.all([a.refresh(), b.refresh()]);
    expect(a.state().drift!.drifting).toBe(true);
    expect(b.state().drift!.drifting).toBe(true);
    const resets = (await redis.client.lrange('quality:{ns/drift}:buckets', 0, -1))
      .map((b) => JSON.parse(b) as { r: number })
      .filter((bucket) => bucket.r === 1);
    expect(resets).toHaveLength(1);
    // Only what came after the flip counts for calibration.
    expect(a.state().estimate!.labelled).toBe(0);
    expect(before).toBeGreaterThan(0);
    // Clean again: the test clears once the drift window has turned over.
    for (let i = 0; i < 4; i += 1) {
      feed(a, 0, 100, 0, 3);
      await a.refresh();
    }
    expect(a.state().drift!.drifting).toBe(false);
  });
});

describe('shadow sampling', () => {
  it('draws about its rate and skips, counted, when the cap is reached', async () => {
    let seed = 1;
    const random = () => ((seed = (seed * 16807) % 2147483647) - 1) / 2147483646;
    const outcomes: Record<string, number> = { ok: 0, failed: 0, skipped: 0 };
    const shadow = createShadow({
      rate: 0.1,
      maxInFlight: 2,
      random,
      onOutcome: (o, rows) => (outcomes[o]! += rows),
    });
    const drawn = shadow.draw(Array.from({ length: 10_000 }, (_, i) => i));
    expect(drawn.length).toBeGreaterThan(900);
    expect(drawn.length).toBeLessThan(1100);

    const releases: Array<() => void> = [];
    const hang = () => new Promise<void>((resolve) => releases.push(resolve));
    expect(shadow.start(1, hang)).toBe(true);
    expect(shadow.start(1, hang)).toBe(true);
    // The cap: a third call is not started (and start itself never waits).
    expect(shadow.start(1, hang)).toBe(false);
    expect(outcomes['skipped']).toBe(1);
    releases.forEach((r) => r());
    await shadow.idle();
    expect(outcomes['ok']).toBe(2);
    expect(shadow.start(1, () => Promise.reject(new Error('cloud down')))).toBe(true);
    await shadow.idle();
    expect(outcomes['failed']).toBe(1);
  });
});
