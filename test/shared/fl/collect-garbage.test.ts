/** collectGarbage runs a full collection now: what nothing holds any more is gone after it. */
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { collectGarbage } from '../../../shared/fl/collect-garbage.js';

describe('collectGarbage', () => {
  it('collects an object nothing holds, and can be called again', async () => {
    for (let i = 0; i < 2; i += 1) {
      const ref = new WeakRef({ values: new Float64Array(1 << 16) });
      // A WeakRef keeps its target until the end of the task that made it.
      await sleep(0);
      collectGarbage();
      expect(ref.deref()).toBeUndefined();
    }
  });
});
