/**
 * The regimes the aset-signal bench measures in (issue 20, step 1). `steady` is the one measured
 * until 2026-11-24: lambda = 60, decisions after a 2-minute warm-up. The others are the paper's
 * own: an empty system with decisions from window 0 ("every moment of the simulation", the
 * 8-minute episodes "to avoid steady states"), the two dynamic patterns of its figure 7, and
 * random lambda schedules (the kind training may use, never the evaluation patterns).
 */
import type { Load } from '../aset-sim/jobs.js';

interface Condition {
  readonly load: Load;
  /** Window indices (25 s) at which each policy is tried for one window. */
  readonly decisions: readonly number[];
  /** First counted window of the references (0: counted from t = 0). */
  readonly warmupWindows: number;
  readonly note: string;
}

/** Every other window from `from`, while a 5-window horizon still ends inside 10 minutes. */
const everyOther = (from: number) =>
  Array.from({ length: Math.floor((19 - from) / 2) + 1 }, (_, i) => from + 2 * i);

const conditions = {
  steady: {
    load: { kind: 'constant', lambda: 60 },
    decisions: everyOther(5),
    warmupWindows: 5,
    note: 'lambda = 60 after a 2-minute warm-up (the regime measured until 2026-11-24)',
  },
  fill: {
    load: { kind: 'constant', lambda: 60 },
    decisions: everyOther(0),
    warmupWindows: 0,
    note: 'lambda = 60 from an empty system, decisions from window 0',
  },
  burst: {
    load: { kind: 'pattern', name: 'burst' },
    decisions: everyOther(0),
    warmupWindows: 0,
    note: "the paper's burst pattern, 20 / 60 / 100 every 150 s, from an empty system",
  },
  falling: {
    load: { kind: 'pattern', name: 'falling' },
    decisions: everyOther(0),
    warmupWindows: 0,
    note: 'the falling pattern, 60 / 40 / 20 then back to 60 in steps of 10, every 150 s, from an empty system',
  },
  random: {
    load: { kind: 'random' },
    decisions: everyOther(0),
    warmupWindows: 0,
    note: 'a random schedule per seed (lambda 20-100, steps of 60-300 s), from an empty system',
  },
} as const satisfies Record<string, Condition>;

type ConditionName = keyof typeof conditions;
const conditionNames = Object.keys(conditions) as ConditionName[];

export { conditions, conditionNames };
export type { Condition, ConditionName };
