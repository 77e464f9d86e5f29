/**
 * In-process state a test awaits instead of polling it: whatever changes the state calls
 * `changed()`, which settles every `when(check)` whose check now holds. A check that never holds
 * leaves the test to its timeout.
 */
export interface Signal {
  changed(): void;
  when(check: () => boolean): Promise<void>;
}

export function signal(): Signal {
  const waiting = new Set<() => void>();
  return {
    changed() {
      for (const test of [...waiting]) test();
    },
    when(check) {
      return new Promise((resolve) => {
        const test = () => {
          if (!check()) return;
          waiting.delete(test);
          resolve();
        };
        waiting.add(test);
        test();
      });
    },
  };
}
