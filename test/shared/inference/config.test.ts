/** The inference workers' settings: the event-answer lease and retention, the pool's deadline, read once and checked. */
import { describe, expect, it } from 'vitest';
import { loadEdgeConfig, loadServingConfig } from '../../../shared/inference/config.js';

describe('loadEdgeConfig', () => {
  it('leases an inference event for 5 s and keeps its answer 120 s unless told otherwise', () => {
    expect(loadEdgeConfig({}).eventAnswers).toEqual({ leaseSeconds: 5, keepSeconds: 120 });
    expect(
      loadEdgeConfig({ EVENT_ANSWER_LEASE_SECONDS: '2', EVENT_ANSWER_KEEP_SECONDS: '600' })
        .eventAnswers,
    ).toEqual({ leaseSeconds: 2, keepSeconds: 600 });
  });

  it('refuses a lease or a retention under one second, naming the variable', () => {
    expect(() => loadEdgeConfig({ EVENT_ANSWER_LEASE_SECONDS: '0' })).toThrow(
      /EVENT_ANSWER_LEASE_SECONDS/,
    );
    expect(() => loadEdgeConfig({ EVENT_ANSWER_KEEP_SECONDS: '0.5' })).toThrow(
      /EVENT_ANSWER_KEEP_SECONDS/,
    );
  });
});

describe('loadServingConfig', () => {
  const env = { MODEL_URL: 'file:///models/edge.onnx' };

  it('gives every inference request a 5 s deadline and never stops threads unless told to', () => {
    expect(loadServingConfig('edge', env).pool).toMatchObject({
      deadlineMs: 5000,
      chaosStopEveryMs: 0,
    });
    expect(
      loadServingConfig('cloud', { ...env, POOL_DEADLINE_MS: '250', POOL_CHAOS_STOP_MS: '5000' })
        .pool,
    ).toMatchObject({ deadlineMs: 250, chaosStopEveryMs: 5000 });
  });

  it('spaces large requests three turns apart while small ones wait, unless told otherwise', () => {
    expect(loadServingConfig('edge', env).pool.largeTurnsApart).toBe(3);
    expect(
      loadServingConfig('edge', { ...env, POOL_LARGE_TURNS_APART: '1' }).pool.largeTurnsApart,
    ).toBe(1);
    expect(() => loadServingConfig('edge', { ...env, POOL_LARGE_TURNS_APART: '0' })).toThrow(
      /POOL_LARGE_TURNS_APART/,
    );
  });

  it('refuses a deadline under 1 ms, naming the variable', () => {
    expect(() => loadServingConfig('edge', { ...env, POOL_DEADLINE_MS: '0' })).toThrow(
      /POOL_DEADLINE_MS/,
    );
  });
});
