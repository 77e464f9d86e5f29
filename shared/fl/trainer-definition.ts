/**
 * fl-trainer as a function: the aggregator's round event, answered when the round is done
 * (200 with how it ended) or at once for the round already in flight (202). Liveness and
 * readiness are the framework's: a trainer waiting for its aggregator is still ready.
 */
import { eventTypes } from '../events/index.js';
import { defineFunction, onEvent } from '../http/index.js';
import type { FunctionDefinition, ReadinessCheck } from '../http/index.js';
import { roundStarted } from '../messages/federated.js';
import type { Trainer } from './trainer.js';

function flTrainerDefinition(deps: {
  trainer: Trainer;
  readiness: readonly ReadinessCheck[];
}): FunctionDefinition {
  const { trainer } = deps;
  return defineFunction({
    name: 'fl-trainer',
    events: [
      onEvent({
        type: eventTypes.flRoundStarted,
        data: roundStarted,
        async handle({ data }) {
          const answer = await trainer.onRound(data);
          if (answer.kind === 'already-training') {
            return {
              kind: 'json',
              status: 202,
              body: { round: answer.round, outcome: 'already-training' },
            };
          }
          return { kind: 'json', status: 200, body: answer.result };
        },
      }),
    ],
    readiness: deps.readiness,
  });
}

export { flTrainerDefinition };
