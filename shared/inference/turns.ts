/**
 * Large requests' work on the HTTP thread, in turns. The HTTP thread is shared: a large
 * request's body, its parsing, and the reading and formatting of its answer (hundreds of
 * microseconds each) run between a small request's arrival and its answer. Large requests take
 * turns here instead: one piece per turn of the event loop (setImmediate), so a small request
 * waits for at most one of them at each of its own steps.
 *
 * One piece per turn still gives large requests about half the thread when small ones keep it
 * busy, and a batch-of-one caller then waits twice as long as alone. So while small work is in
 * flight (a source says so: the inference pool, for small requests waiting for or in a run), a
 * large piece runs only every `turnsApart`-th turn, and the turns between serve the small
 * requests. A turn with nothing else to do takes microseconds: with the loop idle the large
 * pieces lose almost nothing, and the HTTP thread is never left idle while one waits.
 */

/** Whether small work is in flight, and how many turns apart large pieces run meanwhile. */
interface SmallWork {
  busy(): boolean;
  turnsApart: number;
}

interface Turns {
  /** Resolves when the caller's large piece may run: in a turn of its own. */
  (): Promise<void>;
  /** Adds a source of small work; the returned function removes it. */
  yieldTo(small: SmallWork): () => void;
}

function createTurns(): Turns {
  const waiting: Array<() => void> = [];
  const sources = new Set<SmallWork>();
  let scheduled = false;
  /** Turns passed since the last large piece ran. */
  let skipped = 0;
  /** The spacing the busy sources ask for (1: every turn). */
  const apart = () => {
    let turns = 1;
    for (const source of sources) {
      if (source.turnsApart > turns && source.busy()) turns = source.turnsApart;
    }
    return turns;
  };
  const schedule = () => {
    scheduled = true;
    setImmediate(next);
  };
  function next(): void {
    scheduled = false;
    skipped += 1;
    if (skipped < apart()) return schedule();
    skipped = 0;
    waiting.shift()?.();
    if (waiting.length > 0) schedule();
  }
  const take = (() =>
    new Promise<void>((resolve) => {
      waiting.push(resolve);
      if (!scheduled) schedule();
    })) as Turns;
  take.yieldTo = (small) => {
    sources.add(small);
    return () => sources.delete(small);
  };
  return take;
}

/**
 * The queue of the process's HTTP thread, one per process as the thread is: a large request
 * takes a turn before its body is read (definition.ts), another before it is parsed, and
 * another when its run has answered, before the answer is read and formatted (pool.ts); all
 * wait in this one line.
 */
const largeWork = createTurns();

export { createTurns, largeWork };
