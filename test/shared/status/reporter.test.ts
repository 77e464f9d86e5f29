/**
 * The edge worker's reporter against a real upstream-status (Redis, the development API server):
 * what it sends passes the one schema and reaches the status; a new estimate is news.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WorkerQuality } from '../../../shared/crds/index.js';
import { buildServer, createHttpClient } from '../../../shared/http/index.js';
import type { HttpSend } from '../../../shared/http/index.js';
import { WorkerCounters, startReporter } from '../../../shared/inference/index.js';
import { workerMessage } from '../../../shared/messages/worker-message.js';
import type { WorkerMessage } from '../../../shared/messages/worker-message.js';
import {
  createReportCounters,
  createUpstream,
  secretTokens,
  upstreamStatusDefinition,
} from '../../../shared/status/index.js';
import { startApiServer } from '../../support/apiserver.js';
import type { TestApiServer } from '../../support/apiserver.js';
import { capturedTelemetry, listen } from '../../support/http.js';
import type { Listening } from '../../support/http.js';
import { testRedis } from '../../support/redis.js';
import type { TestRedis } from '../../support/redis.js';
import { helmetDetectionSample } from '../../support/samples.js';
import { signal } from '../../support/signal.js';

const ns = 'default';
const name = 'helmet-detection-demo';
const token = 'edge0-token-0123456789';

describe('status reporter', () => {
  let api: TestApiServer;
  let redis: TestRedis;
  let upstream: Listening;
  /** Every report the reporter sent, as upstream-status parsed it, and its answer. */
  const sent: Array<{ message: WorkerMessage; status: number }> = [];
  const arrived = signal();
  /** Resolves once the reporter has sent `count` reports since the test began. */
  const reports = (count: number) => arrived.when(() => sent.length >= count);
  const http = createHttpClient();
  const send: HttpSend = async (url, call) => {
    const answer = await http.send(url, call);
    sent.push({
      message: workerMessage.parse(JSON.parse(typeof call.body === 'string' ? call.body : '')),
      status: answer.status,
    });
    arrived.changed();
    return answer;
  };
  const status = async () =>
    (await api.kube.get({ kind: 'jointInferenceService', namespace: ns, name }))['status'] as
      Record<string, unknown> | undefined;

  beforeAll(async () => {
    api = await startApiServer();
    redis = await testRedis();
    await api.kube.create('node', undefined, { metadata: { name: 'edge0' } });
    await api.kube.create('secret', 'edgeai-system', {
      metadata: { name: 'edgeai-node-edge0' },
      data: { token: Buffer.from(token).toString('base64') },
    });
    await api.kube.create('jointInferenceService', ns, helmetDetectionSample());
    const counters = createReportCounters(redis.client, {
      dedupeSeconds: 3600,
      retentionSeconds: 3600,
    });
    upstream = await listen(
      buildServer(
        upstreamStatusDefinition({
          upstream: createUpstream({ kube: api.kube, counters, attempts: 3 }),
          tokens: secretTokens(api.kube, 'edgeai-system', 30_000),
          maxReportAgeMs: 600_000,
          readiness: [],
        }),
        {
          telemetry: capturedTelemetry('upstream-status'),
          bodyLimitBytes: 4096,
          readinessTimeoutMs: 1000,
        },
      ),
    );
  });
  afterAll(async () => {
    http.close();
    await upstream.close();
    await redis.close();
    await api.close();
  });

  const start = (counters: WorkerCounters, quality: () => WorkerQuality | undefined) => {
    const telemetry = capturedTelemetry('edge-infer');
    const reporter = startReporter({
      url: upstream.url,
      namespace: ns,
      name,
      node: 'edge0',
      token,
      reporter: 'edge-pod:1',
      counters,
      quality,
      intervalMs: 40,
      // No heartbeat within the test: every send is a change.
      heartbeatEvery: 1_000_000,
      log: telemetry.log,
      send,
    });
    return { reporter, telemetry };
  };

  it('sends shadowNumber and quality, and sends again when only the quality changes', async () => {
    const counters = new WorkerCounters();
    counters.inferenceNumber = 200;
    counters.hardExampleNumber = 30;
    counters.uploaded = 30;
    counters.shadowNumber = 8;
    let quality: WorkerQuality = {
      accuracyObjective: 2,
      estimatedEdgeAccuracy: 0.91,
      estimatedJointLoss: 1.5,
      cut: 0.4,
      shadowRate: 0.05,
      labelled: 64,
      driftScore: 1.1,
      driftThreshold: 3,
      drifting: false,
      driftWindow: 500,
      outlierShare: 0.06,
    };
    // The reporter reads the estimate once per interval (and only once the previous report
    // was answered): counting the reads counts the intervals, with no clock.
    let reads = 0;
    const read = signal();
    const intervals = (count: number) => {
      const target = reads + count;
      return read.when(() => reads >= target);
    };
    const { reporter } = start(counters, () => {
      reads += 1;
      read.changed();
      return quality;
    });
    try {
      await reports(1);
      expect(sent[0]).toMatchObject({
        status: 200,
        message: {
          worker: 'edge',
          output: {
            taskInfo: {
              uploaded: 30,
              inferenceNumber: 200,
              hardExampleNumber: 30,
              shadowNumber: 8,
            },
            quality,
          },
        },
      });
      // Nothing changes: nothing is sent for several intervals.
      await intervals(4);
      expect(sent).toHaveLength(1);

      quality = { ...quality, driftScore: 7.2, drifting: true, outlierShare: 0.31 };
      await reports(2);
      expect(sent[1]!.message.output?.quality).toEqual(quality);
      expect(sent[1]!.message.output?.taskInfo).toEqual(sent[0]!.message.output?.taskInfo);
      const shown = await status();
      expect(shown).toMatchObject({ inferenceNumber: 200, shadowCount: 8, shadowRatio: 0.04 });
      expect(shown?.['quality']).toMatchObject(quality);
    } finally {
      await reporter.stop();
    }
  });

  it('leaves out an estimate out of bounds, not the counts, and says why once', async () => {
    sent.length = 0;
    const counters = new WorkerCounters();
    counters.inferenceNumber = 300;
    const { reporter, telemetry } = start(counters, () => ({
      estimatedEdgeAccuracy: Number.NaN,
    }));
    try {
      await reports(1);
      counters.inferenceNumber = 310;
      await reports(2);
      expect(sent.map((s) => s.status)).toEqual([200, 200]);
      // No shadowing yet: the field is left out, as an older upstream-status would want.
      expect(sent[1]!.message.output).toEqual({
        taskInfo: { uploaded: 0, inferenceNumber: 310, hardExampleNumber: 0 },
      });
      const warnings = telemetry.lines.filter((line) =>
        String(line['msg']).startsWith('quality estimate out of bounds'),
      );
      expect(warnings).toHaveLength(1);
      expect(warnings[0]?.['reason']).toMatch(/^estimatedEdgeAccuracy: /);
      // The previous test's quality is still the service's latest.
      expect(await status()).toMatchObject({ quality: { drifting: true } });
    } finally {
      await reporter.stop();
    }
  });
});
