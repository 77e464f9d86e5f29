/**
 * Answers leave together at the end of the event loop's turn, not one by one as each is ready.
 *
 * Why: each answer written to a client that sleeps (waiting for it) wakes that client's process,
 * and waking a process on another core is an inter-processor interrupt, which on a virtual
 * machine is a trip through the hypervisor. The sender pays for it, inside its write. Profiled
 * under bench/harness's load (perf: `sock_def_readable` → `try_to_wake_up`), it was a sixth of
 * shared/http's CPU per request, 14 times what the bare node:http hello paid per answer: the
 * hello's client never slept, shared/http's (the slower server) always did. Written together,
 * the answers of one turn wake it once. Behind Knative the client is queue-proxy, the same way.
 *
 * The cost is latency: an answer waits for the rest of its turn (the other requests read in it,
 * and the immediates queued before its flush, such as an inference worker's large-request
 * steps), a few microseconds when there is one request and up to about a millisecond under the
 * edge worker's mixed load; its owner records the request's duration when it has left.
 *
 * The caller sets the head first (writeHead throws what Node refuses, while a clean 500 can
 * still be sent) and checks the body's type. Each answer's owner hears how it ended, once the
 * turn is over: sent (maybe still being written, when larger than the socket took at once), its
 * client gone meanwhile (nothing written), or its end thrown (its connection is then cut).
 */
import type { ServerResponse } from 'node:http';

type Body = string | Uint8Array | undefined;

/** How a queued answer ended. */
type Ended = { kind: 'sent' } | { kind: 'gone' } | { kind: 'failed'; err: unknown };

interface Ending<T> {
  res: ServerResponse;
  body: Body;
  owner: T;
}

/** Ends `res` with `body` (its head already set) at the end of this turn. */
type TurnEnd<T> = (res: ServerResponse, body: Body, owner: T) => void;

const sent: Ended = { kind: 'sent' };
const gone: Ended = { kind: 'gone' };

/** `ended` hears of each answer once, after its end; it must not throw. */
function createTurnEnd<T>(ended: (owner: T, how: Ended) => void): TurnEnd<T> {
  let queue: Array<Ending<T>> = [];
  const flush = () => {
    const ending = queue;
    queue = [];
    for (const { res, body, owner } of ending) {
      if (res.destroyed) {
        ended(owner, gone);
        continue;
      }
      let how = sent;
      try {
        res.end(body);
      } catch (err) {
        res.destroy();
        how = { kind: 'failed', err };
      }
      ended(owner, how);
    }
  };
  return (res, body, owner) => {
    if (queue.push({ res, body, owner }) === 1) setImmediate(flush);
  };
}

export { createTurnEnd };
export type { Ended, TurnEnd };
