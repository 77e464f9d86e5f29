/**
 * fl-trainer as a function: the aggregator's round event, answered when the round is done
 * (200 with how it ended) or at once for the round already in flight (202). The event names the
 * model to download (JSON) or carries it (binary, the round in its `flstarted` extension): a
 * carried model is trusted only from a sender holding this trainer's node token, as the
 * aggregator does. Liveness and readiness are the framework's: a trainer waiting for its
 * aggregator is still ready.
 */
import { z } from 'zod';
import { ValidationError } from '../errors/index.js';
import { eventTypes } from '../events/index.js';
import { defineFunction, onEvent, releaseBody } from '../http/index.js';
import type { Answer, FunctionDefinition, ReadinessCheck } from '../http/index.js';
import { roundStarted, roundStartedAttributes } from '../messages/federated.js';
import { parseInput } from '../schema/index.js';
import { authenticateBearer } from '../status/node-auth.js';
import type { NodeTokens } from '../status/node-auth.js';
import type { RoundAnswer, Trainer } from './trainer.js';

function answer(outcome: RoundAnswer): Answer {
  if (outcome.kind === 'already-training') {
    return {
      kind: 'json',
      status: 202,
      body: { round: outcome.round, outcome: 'already-training' },
    };
  }
  return { kind: 'json', status: 200, body: outcome.result };
}

/**
 * A round event's attributes parsed once before the first round: a schema's first parse is its
 * slowest (zod compiles it), and a trainer's first round would otherwise wait for it.
 */
function warmUpParsing(): void {
  const round = {
    job: 'warm-up/warm-up',
    round: 1,
    base: 0,
    model: { url: 'http://warm-up.invalid/v1/models/0', sha256: '0'.repeat(64) },
    training: { epochs: 1, batchSize: 10, learningRate: 0.01, seed: 1, proximalMu: 0 },
    deadline: new Date(0).toISOString(),
  };
  parseInput(roundStartedAttributes, { flstarted: JSON.stringify(round) }, 'extensions');
}

function flTrainerDefinition(deps: {
  trainer: Trainer;
  /** This trainer's node and its token: who may push a model to it. */
  node: string;
  token: string | undefined;
  readiness: readonly ReadinessCheck[];
}): FunctionDefinition {
  const { trainer, node, token } = deps;
  warmUpParsing();
  const tokens: NodeTokens = {
    token: (from) =>
      Promise.resolve(from === node && token !== undefined ? Buffer.from(token) : undefined),
  };
  return defineFunction({
    name: 'fl-trainer',
    events: [
      onEvent({
        type: eventTypes.flRoundStarted,
        data: z.unknown(),
        async handle({ data, event }, ctx) {
          if (!(data instanceof Uint8Array))
            return answer(await trainer.onRound(parseInput(roundStarted, data, 'data')));
          try {
            const { flstarted } = parseInput(
              roundStartedAttributes,
              event.extensions,
              'extensions',
            );
            await authenticateBearer(tokens, ctx.headers);
            if (data.length === 0) throw new ValidationError('data: the round carries no model');
            return answer(await trainer.onRound(flstarted, data));
          } finally {
            // The round is over and kept nothing of the body (the model was decoded into
            // copies): its memory takes the next round's model (shared/http/body.ts).
            releaseBody(data);
          }
        },
      }),
    ],
    // A pushed model is read into memory reused from round to round, not a new buffer each time:
    // on the machines measured, first touching new memory cost more than the copy itself.
    alignBodyAt: (headers) => (headers['ce-type'] === eventTypes.flRoundStarted ? 0 : undefined),
    readiness: deps.readiness,
  });
}

export { flTrainerDefinition };
