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
 * The cost is latency: an answer waits for the turn's other requests (its poll phase) to be
 * served, a few microseconds when there is one and at most the turn when the server is
 * saturated, which is when it cannot answer sooner anyway.
 *
 * The caller sets the head first (writeHead throws what Node refuses, while a clean 500 can
 * still be sent) and checks the body's type; a client gone meanwhile is skipped, and one that
 * goes while a large answer is written is the owner's to report (`unfinished`).
 */
import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

type Body = string | Uint8Array | undefined;

interface Ending<T> {
  res: ServerResponse;
  body: Body;
  owner: T;
}

/** Ends `res` with `body` (its head already set) at the end of this turn. */
type TurnEnd<T> = (res: ServerResponse, body: Body, owner: T) => void;

/**
 * `unfinished` hears of an answer still being written after its end (larger than the socket
 * took at once), with the socket it goes out on; `failed`, of one whose end threw (its
 * connection is then cut).
 */
function createTurnEnd<T>(
  unfinished: (owner: T, socket: Socket | null) => void,
  failed: (owner: T, err: unknown) => void,
): TurnEnd<T> {
  let queue: Array<Ending<T>> = [];
  const flush = () => {
    const ending = queue;
    queue = [];
    for (const { res, body, owner } of ending) {
      if (res.destroyed) continue;
      try {
        res.end(body);
        if (!res.writableFinished) unfinished(owner, res.socket);
      } catch (err) {
        failed(owner, err);
        res.destroy();
      }
    }
  };
  return (res, body, owner) => {
    if (queue.push({ res, body, owner }) === 1) setImmediate(flush);
  };
}

export { createTurnEnd };
export type { TurnEnd };
