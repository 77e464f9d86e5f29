/** joiner: an ML-graph node that joins a transaction's inputs, or hands out a partial at its deadline. */
import { createHttpClient, sinkPost } from '../../shared/http/index.js';
import type { FunctionFactory } from '../../shared/http/index.js';
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
  const redis = requireRedis(config.redis, 'joiner', telemetry.log);
  const metrics = defineMetrics(telemetry);
  const partials = metrics.counter(
    'edgeai_mlgraph_partial_joins_total',
    'Joins handed out incomplete at their deadline',
  );
  const refused = metrics.counter(
    'edgeai_mlgraph_refused_partials_total',
    'Partial joins the sink refused for good (kept for GET only)',
  );
  const expired = metrics.counter(
    'edgeai_mlgraph_expired_joins_total',
    'Overdue joins whose keys expired before they were handed out (sweeps came too late)',
  );
  const late = metrics.counter(
    'edgeai_mlgraph_late_inputs_total',
    'Inputs that arrived after their join had ended',
  );
  const http = createHttpClient();
  const joiner = createJoiner({
    node: settings.node,
    store: createJoinStore(redis, {
      node: settings.node,
      deadlineMs: settings.deadlineMs,
      keepMs: settings.keepMs,
      // Longer than the sink's worst case (3 attempts of 5 s and the backoff between), so a
      // partial being sent is not claimed and sent again by another replica meanwhile.
      leaseMs: 30_000,
    }),
    now: Date.now,
    sink:
      settings.sink === undefined
        ? undefined
        : createEventSink({
            url: settings.sink,
            source: `/apis/edgeai.io/functions/joiner/${settings.node}`,
            attempts: 3,
            post: sinkPost(http.send),
          }),
    onPartial: () => partials(),
    onRefused: (joined, err) => {
      refused();
      telemetry.log.error(
        { puid: joined.puid, err },
        'the sink refused a partial join: kept for GET only',
      );
    },
    onSendError: (joined, err) =>
      telemetry.log.warn(
        { puid: joined.puid, err },
        'partial join not sent; sent again after its lease',
      ),
    onExpired: (count) => {
      expired({}, count);
      telemetry.log.error({ count }, 'overdue joins expired before they were handed out');
    },
  });
  return Promise.resolve({
    definition: joinerDefinition({
      node: settings.node,
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
      http.close();
      return Promise.resolve();
    },
  });
};

export default factory;
