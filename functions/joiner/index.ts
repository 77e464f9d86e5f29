/** joiner: an ML-graph node that joins a transaction's inputs, or hands out a partial at its deadline. */
import type { FunctionFactory } from '../../bin/serve.js';
import { createEventSink } from '../../shared/events/index.js';
import {
  createJoinStore,
  createJoiner,
  joinerDefinition,
  loadJoinerConfig,
  sweepEvery,
} from '../../shared/mlgraph/index.js';
import { redisReadiness, requireRedis } from '../../shared/redis/index.js';
import { defineMetrics } from '../../shared/telemetry/index.js';

const factory: FunctionFactory = ({ config, telemetry }) => {
  const settings = loadJoinerConfig();
  const redis = requireRedis(config.redis, 'joiner', (fields, message) =>
    telemetry.log.warn(fields, message),
  );
  const metrics = defineMetrics(telemetry);
  const partials = metrics.counter(
    'edgeai_mlgraph_partial_joins_total',
    'Joins handed out incomplete at their deadline',
  );
  const late = metrics.counter(
    'edgeai_mlgraph_late_inputs_total',
    'Inputs that arrived after their join had ended',
  );
  const joiner = createJoiner({
    node: settings.node,
    store: createJoinStore(redis, {
      node: settings.node,
      deadlineMs: settings.deadlineMs,
      keepMs: settings.keepMs,
      leaseMs: Math.max(1_000, settings.deadlineMs),
    }),
    now: Date.now,
    sink:
      settings.sink === undefined
        ? undefined
        : createEventSink({
            url: settings.sink,
            source: `/apis/edgeai.io/functions/joiner/${settings.node}`,
            attempts: 3,
          }),
    onPartial: () => partials(),
  });
  return Promise.resolve({
    definition: joinerDefinition({
      joiner,
      maxInputs: settings.maxInputs,
      readiness: [redisReadiness(redis)],
      afterInput: sweepEvery(joiner, Math.max(100, settings.deadlineMs / 4), Date.now, (err) =>
        telemetry.log.warn({ err }, 'overdue joins not handed out yet; retried on a later sweep'),
      ),
      onLate: () => late(),
    }),
    close: () => {
      redis.disconnect();
      return Promise.resolve();
    },
  });
};

export default factory;
