/**
 * A joiner node of an ML graph (the join contract): inputs of one transaction are buffered until
 * the last one that can still arrive has (then the input that completed it gets the joined
 * result, every other an empty answer), or until the deadline, when the transaction is handed
 * out as an explicit partial: to the sink as an `io.edgeai.mlgraph.joined` event with
 * `partial: true`, and to anyone who asks for it by prediction id.
 */
import { NotFoundError } from '../errors/index.js';
import { SinkRefusedError, eventTypes } from '../events/index.js';
import type { Sink } from '../events/index.js';
import { extensions } from '../messages/mlgraph.js';
import type { AddOutcome, JoinStore, Joined } from './join-store.js';
import { joinedAnswer } from './join-answer.js';

/** What a completed or partial join answers with. */
interface JoinResult {
  readonly puid: string;
  /** Handed out at the deadline, or still open (a `get` before it ends). */
  readonly partial: boolean;
  /** Inputs the tightest bound still allowed for when the join ended. */
  readonly missing: number;
  /** By source, in source-name order. */
  readonly inputs: Readonly<Record<string, unknown>>;
}

interface Joiner {
  /** `json`: the input's JSON text, kept as it is. */
  add(input: { puid: string; source: string; pending: number; json: string }): Promise<AddOutcome>;
  /** Lowers a transaction's bound to `inputs` in all (JoinStore.tighten). */
  tighten(puid: string, inputs: number): Promise<AddOutcome>;
  /** Hands out the joins past their deadline; says how many went out. */
  sweep(): Promise<number>;
  get(puid: string): Promise<Joined>;
}

function resultOf(joined: Joined): JoinResult {
  return {
    puid: joined.puid,
    partial: joined.state !== 'complete',
    missing: joined.missing,
    inputs: joined.inputs,
  };
}

/**
 * The join's answer as bytes, its inputs spliced in as they were sent (join-answer.ts: what a
 * built-in join in the executor answers for the same inputs); `withState` adds the state last,
 * as `GET /joins/{puid}` answers.
 */
function answerOf(joined: Joined, withState = false): Buffer {
  return joinedAnswer(
    {
      puid: joined.puid,
      partial: joined.state !== 'complete',
      missing: joined.missing,
      state: withState ? joined.state : undefined,
    },
    joined.texts.map(([source, json]) => ({ source, json })),
  ).json;
}

function createJoiner(deps: {
  node: string;
  store: JoinStore;
  now: () => number;
  /** Where partials go (K_SINK); without one they are only kept for `get`. */
  sink: Sink | undefined;
  sweepLimit?: number;
  /** A partial handed out (sent to the sink, or kept for `get` without one). */
  onPartial?(joined: Joined): void;
  /** The sink refused a partial for good: it is kept for `get` only. */
  onRefused?(joined: Joined, error: SinkRefusedError): void;
  /** The sink could not take a partial now: it is sent again when its claim's lease ends. */
  onSendError?(joined: Joined, error: unknown): void;
  /** Overdue joins whose keys expired before anyone handed them out (nothing was sent). */
  onExpired?(count: number): void;
}): Joiner {
  const { store } = deps;
  const limit = deps.sweepLimit ?? 100;
  return {
    add: (input) => store.add({ ...input, nowMs: deps.now() }),
    tighten: (puid, inputs) => store.tighten({ puid, inputs }),
    async sweep() {
      const { claimed, expired } = await store.due(deps.now(), limit);
      if (expired > 0) deps.onExpired?.(expired);
      let handed = 0;
      for (const joined of claimed) {
        try {
          // The event's id is fixed per transaction: a resend after a lost answer is one event.
          await deps.sink?.({
            id: `${deps.node}:${joined.puid}:partial`,
            type: eventTypes.graphJoined,
            subject: joined.puid,
            data: { ...resultOf(joined), partial: true },
            extensions: { [extensions.puid]: joined.puid },
          });
        } catch (error) {
          if (!(error instanceof SinkRefusedError)) {
            // Left claimed: due again when the lease ends. The next join is not held up.
            deps.onSendError?.(joined, error);
            continue;
          }
          if (await store.finish(joined.puid, joined.claim)) deps.onRefused?.(joined, error);
          continue;
        }
        if (await store.finish(joined.puid, joined.claim)) {
          handed += 1;
          deps.onPartial?.(joined);
        }
      }
      return handed;
    },
    async get(puid) {
      const joined = await store.get(puid);
      if (joined === undefined) throw new NotFoundError(`no join for prediction ${puid} here`);
      return joined;
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
  let running = false;
  return async () => {
    const at = now();
    // One sweep at a time: a slow sink must not stack sweeps of the same joins.
    if (running || at - last < everyMs) return;
    last = at;
    running = true;
    try {
      await joiner.sweep();
    } catch (error) {
      onError(error);
    } finally {
      running = false;
    }
  };
}

export { createJoiner, resultOf, answerOf, sweepEvery };
export type { Joiner, JoinResult };
