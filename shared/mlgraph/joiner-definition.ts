/**
 * joiner as a function: `POST /predict` takes one input of a transaction, named by
 * `mlgraph-puid`, `mlgraph-source` and `mlgraph-pending-requests`; the input that completes the
 * join is answered 200 with the joined result, every other 202 with no body (the contract's empty
 * reply), its bytes spliced from the inputs' as they were sent (join-answer.ts).
 * `POST /joins/{puid}/bound` with `{"inputs": n}` lowers the bound without an input (a
 * route not taken after the inputs went), answered like an input. `GET /joins/{puid}` gives a join's state and inputs, a partial one included. As
 * CloudEvents, `io.edgeai.mlgraph.partial` with the same metadata as extensions, answered by
 * `io.edgeai.mlgraph.joined` when it completes; the PingSource tick hands out overdue joins.
 */
import { z } from 'zod';
import { ValidationError } from '../errors/index.js';
import { eventTypes } from '../events/index.js';
import { defineFunction, onEvent, onRawRequest, onRequest } from '../http/index.js';
import type { Answer, FunctionDefinition, ReadinessCheck } from '../http/index.js';
import { extensions, headers, parseMetadata, puid, reward } from '../messages/mlgraph.js';
import type { AddOutcome, Joined } from './join-store.js';
import { answerOf, resultOf } from './joiner.js';
import type { Joiner } from './joiner.js';
import { childName } from '../crds/route-strategy.js';

interface JoinerDefinitionDeps {
  /** The node's name: in the ids of the joined events it replies with. */
  node: string;
  joiner: Joiner;
  maxInputs: number;
  readiness: readonly ReadinessCheck[];
  /**
   * Started after each input, not awaited, so it must not reject (`sweepEvery`): sweeps overdue
   * joins now and then, since the tick comes once a minute.
   */
  afterInput?(): Promise<void>;
  onLate?(outcome: Extract<AddOutcome, { kind: 'late' }>): void;
}

/** Reads one of an input's metadata by its name: a request header or an event extension. */
type ReadMetadata = (name: keyof typeof headers) => unknown;

/**
 * Adds one input to its join, its metadata read and checked first: what a request and an event
 * share. `names` are the metadata's names where `read` looks, for the error messages.
 */
function inputAdder(
  deps: Pick<JoinerDefinitionDeps, 'joiner' | 'maxInputs' | 'afterInput' | 'onLate'>,
) {
  // Digits only (an empty header is not 0); a structured event may carry it as a JSON number.
  const pending = z
    .union([z.string().regex(/^\d{1,9}$/, 'must be a whole number'), z.number().int()])
    .transform(Number)
    .pipe(
      z
        .number()
        .min(0)
        .max(deps.maxInputs - 1, `at most ${deps.maxInputs - 1} (MLGRAPH_MAX_INPUTS - 1)`),
    );
  return async (read: ReadMetadata, names: Record<string, string>, json: string | undefined) => {
    const input = {
      puid: parseMetadata(puid, read('puid'), names['puid']!),
      source: parseMetadata(childName, read('source'), names['source']!),
      pending: parseMetadata(pending, read('pendingRequests'), names['pendingRequests']!),
    };
    if (json === undefined) {
      throw new ValidationError("body: a join input needs a JSON body (the branch's answer)");
    }
    const outcome = await deps.joiner.add({ ...input, json });
    if (outcome.kind === 'late') deps.onLate?.(outcome);
    // Not awaited: handing out overdue joins (a sink that may be slow) is not this input's work.
    void deps.afterInput?.();
    return outcome;
  };
}

type AddInput = ReturnType<typeof inputAdder>;

/**
 * An HTTP input's JSON text, kept as sent (the joined answer splices it in): checked to be JSON,
 * undefined when there is none.
 */
function jsonTextOf(bytes: Buffer): string | undefined {
  const text = bytes.toString('utf8');
  if (text.trim() === '') return undefined;
  try {
    JSON.parse(text);
  } catch {
    throw new ValidationError('body: not JSON (a join input is JSON)');
  }
  return text;
}

/** The joined answer as bytes (join-answer.ts: a built-in join's, byte for byte). */
function joinedBytes(joined: Joined, withState = false): Answer {
  return {
    kind: 'bytes',
    contentType: 'application/json',
    body: answerOf(joined, withState),
    headers: { [headers.puid]: joined.puid },
  };
}

/** An input over HTTP: the completing one is answered with the joined result. */
function predictRoute(add: AddInput) {
  return onRawRequest({
    method: 'POST',
    path: '/predict',
    async handle({ body }, ctx): Promise<Answer> {
      const json = jsonTextOf(body.bytes);
      const outcome = await add((name) => ctx.headers[headers[name]], headers, json);
      if (outcome.kind === 'complete' || outcome.kind === 'again')
        return joinedBytes(outcome.joined);
      return { kind: 'accepted' };
    },
  });
}

/** A join by prediction id: read it, or lower its bound without an input. */
function joinRoutes(joiner: Pick<Joiner, 'tighten' | 'get'>, maxInputs: number) {
  return [
    onRequest({
      method: 'POST',
      path: '/joins/:puid/bound',
      params: z.object({ puid }),
      body: z.object({ inputs: z.number().int().min(1).max(maxInputs) }).strict(),
      async handle({ params, body }): Promise<Answer> {
        const outcome = await joiner.tighten(params.puid, body.inputs);
        if (outcome.kind === 'complete' || outcome.kind === 'again')
          return joinedBytes(outcome.joined);
        // Ended at its deadline: what was handed out.
        if (outcome.kind === 'late') return joinedBytes(await joiner.get(params.puid), true);
        return { kind: 'accepted' };
      },
    }),
    onRequest({
      method: 'GET',
      path: '/joins/:puid',
      params: z.object({ puid }),
      async handle({ params }) {
        return joinedBytes(await joiner.get(params.puid), true);
      },
    }),
  ];
}

/** An input as an event: the completing one is answered by a joined event. */
function partialEvent(deps: { node: string; add: AddInput }) {
  const { node, add } = deps;
  return onEvent({
    type: eventTypes.graphPartial,
    data: z.unknown(),
    replies: [eventTypes.graphJoined],
    async handle({ data, event }): Promise<Answer> {
      const json = data === undefined ? undefined : JSON.stringify(data);
      const outcome = await add((name) => event.extensions[extensions[name]], extensions, json);
      if (outcome.kind !== 'complete' && outcome.kind !== 'again') return { kind: 'accepted' };
      return {
        kind: 'reply',
        event: {
          type: eventTypes.graphJoined,
          // Fixed per transaction: the answer to a resent completing input is the same event.
          id: `${node}:${outcome.joined.puid}:joined`,
          subject: outcome.joined.puid,
          data: resultOf(outcome.joined),
          extensions: { [extensions.puid]: outcome.joined.puid },
        },
      };
    },
  });
}

function joinerDefinition(deps: JoinerDefinitionDeps): FunctionDefinition {
  const { joiner } = deps;
  const add = inputAdder(deps);
  return defineFunction({
    name: 'joiner',
    routes: [
      predictRoute(add),
      ...joinRoutes(joiner, deps.maxInputs),
      onRequest({
        method: 'POST',
        path: '/reward',
        // A joiner learns nothing from rewards; the contract still has it take them.
        body: reward,
        handle: () => Promise.resolve({ kind: 'accepted' }),
      }),
    ],
    events: [
      partialEvent({ node: deps.node, add }),
      onEvent({
        type: eventTypes.pingTick,
        data: z.unknown(),
        async handle() {
          await joiner.sweep();
          return { kind: 'accepted' };
        },
      }),
    ],
    readiness: deps.readiness,
  });
}

export { joinerDefinition };
