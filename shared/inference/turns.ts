/**
 * One piece of a large request's work per event-loop turn. The HTTP thread is shared: a large
 * request's parsing, and the reading and formatting of its answer (hundreds of microseconds
 * each), run between a small request's arrival and its answer. With many large requests in
 * flight, one turn of the loop would run all of them first and a batch-of-one caller would wait
 * for the lot. Large requests instead take turns here, one per turn (setImmediate), so a small
 * one waits for at most one of them at each of its own steps; the large ones lose nothing while
 * the loop has no small work (a turn is then almost free).
 */
function createTurns(): () => Promise<void> {
  const waiting: Array<() => void> = [];
  let scheduled = false;
  const next = () => {
    scheduled = false;
    waiting.shift()?.();
    if (waiting.length > 0) {
      scheduled = true;
      setImmediate(next);
    }
  };
  return () =>
    new Promise<void>((resolve) => {
      waiting.push(resolve);
      if (!scheduled) {
        scheduled = true;
        setImmediate(next);
      }
    });
}

/**
 * The queue of the process's HTTP thread, one per process as the thread is: a large request
 * takes a turn before its body is parsed (definition.ts) and again when its run has answered,
 * before the answer is read and formatted (pool.ts), and both kinds wait in this one line.
 */
const largeWork = createTurns();

export { createTurns, largeWork };
