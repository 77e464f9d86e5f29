/**
 * Per-key coalescing of an idempotent job (a status write from the latest totals): a caller
 * gets a run that starts after its call, and callers arriving while a run is in flight share the
 * one queued run. Fifty concurrent reports thus cost a few writes, not fifty conflicting ones.
 */
function coalescing<T>(job: (key: string) => Promise<T>): (key: string) => Promise<T> {
  const state = new Map<string, { running: Promise<T>; queued?: Promise<T> }>();
  const start = (key: string): Promise<T> => {
    const running = job(key).finally(() => {
      const entry = state.get(key);
      if (entry?.running !== running) return;
      if (entry.queued === undefined) state.delete(key);
    });
    return running;
  };
  return (key) => {
    const entry = state.get(key);
    if (entry === undefined) {
      const running = start(key);
      state.set(key, { running });
      return running;
    }
    if (entry.queued !== undefined) return entry.queued;
    const queued = entry.running
      .catch(() => undefined)
      .then(() => {
        const running = start(key);
        state.set(key, { running });
        return running;
      });
    entry.queued = queued;
    return queued;
  };
}

export { coalescing };
