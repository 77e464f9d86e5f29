/**
 * A full garbage collection on the calling thread, run once a process (or a thread) has warmed
 * up and before it takes its first round.
 *
 * Why: a function's start-up (modules loaded, schemas compiled, the warm-up's model) leaves a
 * few MB of garbage in the old generation, and V8 collects it only when that generation reaches
 * its first limit. On the trainers that is round 1 or 2, all of them at once: with --trace-gc,
 * every trainer's main thread ran a mark-compact of 45-90 ms (wall, on 2 shared cores) at the
 * same moment, while the round's model was arriving. Collected here, it costs the same once
 * before any round; the next collection is then sized from what is really live.
 *
 * V8 offers no collection to JavaScript unless it is started with --expose-gc; the flag set at
 * run time applies to contexts created afterwards, so the function is taken from a new one.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

let gc: (() => void) | undefined;

function collectGarbage(): void {
  if (gc === undefined) {
    setFlagsFromString('--expose-gc');
    gc = runInNewContext('gc') as () => void;
  }
  gc();
}

export { collectGarbage };
