/**
 * bench/fl-learning's environment knobs: defaults, overrides, and a malformed value refused with
 * the variable's name rather than replaced by the default.
 */
import { describe, expect, it } from 'vitest';
import { parseSettings, quickRates } from '../../../bench/fl-learning/settings.js';

const defaults = { workers: 2, out: '/tmp/out' };

describe('parseSettings', () => {
  it('defaults to the paper setting: 100 clients, C = 0.1, a target 2 points under central', () => {
    const s = parseSettings({}, defaults);
    expect(s).toMatchObject({
      data: 'mnist',
      clients: 100,
      fraction: 0.1,
      targetPoints: 2,
      workers: 2,
      checkThreads: true,
      centralAccuracy: undefined,
    });
    expect(s.out).toBe('/tmp/out');
    expect(s.only).toEqual([]);
  });

  it('reads every knob from the environment', () => {
    const s = parseSettings(
      {
        BENCH_ROUNDS_MAX: '2000',
        BENCH_FL_FEDAVG_ROUNDS_MAX: '400',
        BENCH_FL_SEED: '9',
        BENCH_FL_WORKERS: '0',
        BENCH_FL_CONDITIONS: 'fedsgd-iid, fedavg-iid,',
        BENCH_FL_FRACTION: '0.2',
        BENCH_FL_TARGET_POINTS: '1.5',
        BENCH_FL_OUT: '/elsewhere',
        BENCH_FL_DATA: 'mnist-full',
        BENCH_FL_CHECK_THREADS: '0',
        BENCH_FL_CENTRAL_ACCURACY: '0.9821',
      },
      defaults,
    );
    expect(s).toMatchObject({
      data: 'mnist-full',
      checkThreads: false,
      centralAccuracy: 0.9821,
      fedsgdMaxRounds: 2000,
      fedavgMaxRounds: 400,
      seed: 9,
      workers: 0,
      fraction: 0.2,
      targetPoints: 1.5,
      out: '/elsewhere',
    });
    expect(s.only).toEqual(['fedsgd-iid', 'fedavg-iid']);
  });

  it('reads rate grids, the quick mode, the attack and FedBuff knobs', () => {
    const s = parseSettings(
      {
        BENCH_FL_ETA_FEDAVG: '0.1, 0.14,0.2',
        BENCH_FL_ATTACK: 'random:0.5',
        BENCH_FL_FEDBUFF_K: '10',
        BENCH_FL_FEDBUFF_MAX_STALENESS: '3',
      },
      defaults,
    );
    expect(s.rates).toEqual({ fedavg: [0.1, 0.14, 0.2] });
    expect(s.attack).toEqual({ kind: 'random', std: 0.5 });
    expect(s.fedbuff).toMatchObject({
      bufferSize: 10,
      maxStaleness: 3,
      concurrency: 10,
      slowest: 10,
    });
    const quick = parseSettings({ BENCH_FL_QUICK: '1', BENCH_FL_ETA_FEDSGD: '0.3' }, defaults);
    expect(quick.quick).toBe(true);
    expect(quick.rates).toEqual({
      fedsgd: [0.3],
      fedavg: [...quickRates.fedavg],
      server: [...quickRates.server],
    });
    expect(parseSettings({}, defaults).rates).toEqual({});
  });

  it('refuses a malformed value, naming the variable', () => {
    expect(() => parseSettings({ BENCH_ROUNDS_MAX: '1e9.5' }, defaults)).toThrow(
      /BENCH_ROUNDS_MAX=1e9.5 is not an integer >= 1/,
    );
    expect(() => parseSettings({ BENCH_FL_BUDGET: '0' }, defaults)).toThrow(/BENCH_FL_BUDGET/);
    expect(() => parseSettings({ BENCH_FL_FRACTION: '0' }, defaults)).toThrow(
      /BENCH_FL_FRACTION=0 is not a number in \(0, 1\]/,
    );
    expect(() => parseSettings({ BENCH_FL_WORKERS: 'two' }, defaults)).toThrow(/BENCH_FL_WORKERS/);
    expect(() => parseSettings({ BENCH_FL_TARGET_POINTS: '-1' }, defaults)).toThrow(
      /BENCH_FL_TARGET_POINTS/,
    );
    expect(() => parseSettings({ BENCH_FL_ETA_FEDAVG: '0.1,,0.2' }, defaults)).toThrow(
      /BENCH_FL_ETA_FEDAVG/,
    );
    expect(() => parseSettings({ BENCH_FL_ATTACK: 'flip:2' }, defaults)).toThrow(
      /BENCH_FL_ATTACK=flip:2: the kind/,
    );
    expect(() => parseSettings({ BENCH_FL_QUICK: 'yes' }, defaults)).toThrow(/BENCH_FL_QUICK/);
    expect(() => parseSettings({ BENCH_FL_DATA: 'mnist-60k' }, defaults)).toThrow(
      /BENCH_FL_DATA=mnist-60k is not one of mnist, mnist-full/,
    );
    expect(() => parseSettings({ BENCH_FL_CENTRAL_ACCURACY: '98.21' }, defaults)).toThrow(
      /BENCH_FL_CENTRAL_ACCURACY=98.21 is not a number in \(0, 1\]/,
    );
    expect(() => parseSettings({ BENCH_FL_CHECK_THREADS: 'no' }, defaults)).toThrow(
      /BENCH_FL_CHECK_THREADS=no is not 0 or 1/,
    );
  });
});
