/**
 * bench/fl-learning's conditions table: unique ids, the local training per algorithm
 * (FedSGD E=1 B=inf as a job sends it, FedAvg E=5 B=10, FedProx mu > 0), a borrowed learning rate
 * only from a condition run before it, and every figure's conditions in the table.
 */
import { describe, expect, it } from 'vitest';
import {
  budgetComparison,
  conditions,
  readyConditions,
  speedups,
} from '../../../bench/fl-learning/conditions.js';

describe('the conditions table', () => {
  it('has unique ids', () => {
    const ids = conditions.map((c) => c.id);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('trains each family as the issue says', () => {
    for (const c of readyConditions()) {
      if (c.family === 'fedsgd') expect(c.local).toMatchObject({ epochs: 1, batchSize: 0 });
      else expect(c.local).toMatchObject({ epochs: 5, batchSize: 10 });
      if (c.id.startsWith('fedprox')) expect(c.local.proximalMu).toBeGreaterThan(0);
      else expect(c.local.proximalMu ?? 0).toBe(0);
    }
  });

  it('borrows a learning rate only from a ready condition earlier in the table', () => {
    const ready = readyConditions();
    ready.forEach((c, i) => {
      if ('from' in c.rates) {
        const from = c.rates.from;
        expect(ready.slice(0, i).map((r) => r.id)).toContain(from);
      } else expect(c.rates.length).toBeGreaterThan(0);
    });
  });

  it('names only conditions of the table in its figures', () => {
    const ids = conditions.map((c) => c.id);
    for (const s of speedups) expect(ids).toEqual(expect.arrayContaining([s.fedsgd, s.fedavg]));
    expect(ids).toEqual(
      expect.arrayContaining([budgetComparison.baseline, ...budgetComparison.contenders]),
    );
  });
});
