/**
 * Polls `probe` until it gives a value (undefined or a rejection: not yet), through vitest's
 * `vi.waitFor`; fails naming `what` when `timeoutMs` passes first.
 */
import { vi } from 'vitest';

export function until<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  options: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<T> {
  return vi.waitFor(
    async () => {
      const value = await probe();
      if (value === undefined) throw new Error(`never: ${what}`);
      return value;
    },
    { timeout: options.timeoutMs ?? 15_000, interval: options.intervalMs ?? 5 },
  );
}
