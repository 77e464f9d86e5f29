/** edge-infer's settings: the event-answer lease and retention, read once and checked. */
import { describe, expect, it } from 'vitest';
import { loadEdgeConfig } from '../../../shared/inference/config.js';

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
