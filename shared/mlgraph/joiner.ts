/**
 * A joiner node of an ML graph (the join contract): inputs of one transaction are buffered until
 * the last one that can still arrive has (then the input that completed it gets the joined
 * result, every other an empty answer), or until the deadline, when the transaction is handed
 * out as an explicit partial: to the sink as an `io.edgeai.mlgraph.joined` event with
 * `partial: true`, and to anyone who asks for it by prediction id.
 */
import { NotFoundError } from '../errors/index.js';
import { eventTypes } from '../events/index.js';
import type { Sink } from '../events/index.js';
import { extensions } from './headers.js';
import type { AddOutcome, JoinStore, Joined } from './join-store.js';

/** What a completed or partial join answers with. */
interface JoinResult {
  readonly puid: string;
  readonly partial: boolean;
  /** Inputs the tightest bound still allowed for when the join ended. */
  readonly missing: number;
  /** By source, in source-name order. */
  readonly inputs: Readonly<Record<string, unknown>>;
}

interface Joiner {
  add(input: {
    puid: string;
    source: string;
    pending: number;
    payload: unknown;
  }): Promise<AddOutcome>;
  /** Hands out the joins past their deadline; says how many. */
  sweep(): Promise<number>;
  get(puid: string): Promise<JoinResult & { state: Joined['state'] }>;
}

function resultOf(joined: Joined): JoinResult {
  return {
    puid: joined.puid,
    partial: joined.state !== 'complete',
    missing: joined.missing,
    inputs: joined.inputs,
  };
}

function createJoiner(deps: {
  node: string;
  store: JoinStore;
  now: () => number;
  /** Where partials go (K_SINK); without one they are only kept for `get`. */
  sink: Sink | undefined;
  sweepLimit?: number;
  onPartial?(joined: Joined): void;
}): Joiner {
  const { store } = deps;
  const limit = deps.sweepLimit ?? 100;
  return {
    add: (input) => store.add({ ...input, nowMs: deps.now() }),
    async sweep() {
      const due = await store.due(deps.now(), limit);
      for (const joined of due) {
        // A sink failure leaves the join claimed until its lease ends, then due again: the
        // event's id is fixed per transaction, so a resend after a lost answer is one event.
        await deps.sink?.({
          id: `${deps.node}:${joined.puid}:partial`,
          type: eventTypes.graphJoined,
          subject: joined.puid,
          data: { ...resultOf(joined), partial: true },
          extensions: { [extensions.puid]: joined.puid },
        });
        await store.finish(joined.puid);
        deps.onPartial?.(joined);
      }
      return due.length;
    },
    async get(puid) {
      const joined = await store.get(puid);
      if (joined === undefined) throw new NotFoundError(`no join for prediction ${puid} here`);
      return { ...resultOf(joined), state: joined.state };
    },
  };
}

/**
 * A sweep at most every `everyMs` on this replica, for the request path: the PingSource ticks once
 * a minute, deadlines are seconds. A failed sweep is reported, not thrown: the input that
 * triggered it was stored, and its sender must not retry it because a partial could not be sent.
 */
function sweepEvery(
  joiner: Pick<Joiner, 'sweep'>,
  everyMs: number,
  now: () => number,
  onError: (error: unknown) => void,
): () => Promise<void> {
  let last = -Infinity;
  return async () => {
    const at = now();
    if (at - last < everyMs) return;
    last = at;
    try {
      await joiner.sweep();
    } catch (error) {
      onError(error);
    }
  };
}

export { createJoiner, resultOf, sweepEvery };
export type { Joiner, JoinResult };
