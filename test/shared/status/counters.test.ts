/**
 * Report counters in a real Redis: the totals outlive the per-reporter retention, a reporter's
 * counters belong to the node that reports them, and the latest quality report stands.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WorkerQuality } from '../../../shared/crds/index.js';
import type { WorkerMessage } from '../../../shared/messages/worker-message.js';
import { hashTag, key } from '../../../shared/redis/index.js';
import { createReportCounters } from '../../../shared/status/index.js';
import { testRedis } from '../../support/redis.js';
import type { TestRedis } from '../../support/redis.js';
import { qualityReport } from '../../support/worker-quality.js';

const message = (
  uploaded: number,
  inferenceNumber: number,
  worker: WorkerMessage['worker'] = 'edge',
): WorkerMessage => ({
  worker,
  phase: 'Inference',
  status: 'Running',
  output: { taskInfo: { uploaded, inferenceNumber, hardExampleNumber: uploaded } },
});

/** An edge report with a shadow count and, if given, a quality report. */
const shadowed = (
  inferenceNumber: number,
  shadowNumber: number,
  quality?: WorkerQuality,
): WorkerMessage => ({
  worker: 'edge',
  phase: 'Inference',
  status: 'Running',
  output: {
    taskInfo: { uploaded: 0, inferenceNumber, hardExampleNumber: 0, shadowNumber },
    ...(quality === undefined ? {} : { quality }),
  },
});

describe('report counters', () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await testRedis();
  });
  afterAll(() => redis.close());

  it('never moves the totals backwards after the reporters expire', async () => {
    const counters = createReportCounters(redis.client, {
      dedupeSeconds: 3600,
      retentionSeconds: 60,
    });
    const tag = 'default/quiet/uid-1';
    const when = new Date(0).toISOString();
    await counters.record(
      tag,
      { source: 's', id: '1' },
      { node: 'edge0', id: 'old-pod' },
      message(1000, 4000),
      when,
    );
    expect((await counters.totals(tag)).counters.uploaded).toBe(1000);

    // A quiet period longer than the retention: the per-reporter counters expire (they carry
    // the retention as their TTL; deleting them is what the expiry does, without the wait).
    // Then a new worker process reports.
    const reporters = key('status', hashTag(tag), 'reporters');
    const ttl = await redis.client.ttl(reporters);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(60);
    await redis.client.unlink(reporters);
    await counters.record(
      tag,
      { source: 's', id: '2' },
      { node: 'edge0', id: 'new-pod' },
      message(12, 40),
      when,
    );
    expect((await counters.totals(tag)).counters).toEqual({
      uploaded: 1012,
      inferenceNumber: 4040,
      hardExampleNumber: 1012,
      shadowNumber: 0,
    });
  });

  it('clears the expiry that totals written by earlier versions carry', async () => {
    const counters = createReportCounters(redis.client, {
      dedupeSeconds: 3600,
      retentionSeconds: 60,
    });
    const tag = 'default/upgraded/uid-2';
    const totals = key('status', hashTag(tag), 'totals');
    await redis.client.hset(totals, 'uploaded', 7);
    await redis.client.expire(totals, 60);
    await counters.record(
      tag,
      { source: 's', id: '1' },
      { node: 'edge0', id: 'pod' },
      message(1, 2),
      '',
    );
    expect(await redis.client.ttl(totals)).toBe(-1);
    expect((await counters.totals(tag)).counters.uploaded).toBe(8);
  });

  it("keys a reporter's counters by node and role: another node cannot freeze them", async () => {
    const counters = createReportCounters(redis.client, {
      dedupeSeconds: 3600,
      retentionSeconds: 3600,
    });
    const tag = 'default/claimed/uid-3';
    const edge = { node: 'edge0', id: 'edge-pod:1' };
    await counters.record(tag, { source: 's', id: '1' }, edge, message(10, 100), '');
    // Another node, and the same node as another role, naming the edge worker's reporter id.
    await counters.record(
      tag,
      { source: 's', id: '2' },
      { node: 'intruder', id: 'edge-pod:1' },
      message(1_000_000, 1_000_000),
      '',
    );
    await counters.record(tag, { source: 's', id: '3' }, edge, message(1000, 1000, 'cloud'), '');
    await counters.record(tag, { source: 's', id: '4' }, edge, message(50, 500), '');
    expect((await counters.totals(tag)).counters).toEqual({
      uploaded: 50 + 1_000_000 + 1000,
      inferenceNumber: 500 + 1_000_000 + 1000,
      hardExampleNumber: 50 + 1_000_000 + 1000,
      shadowNumber: 0,
    });
  });

  it('takes over counters written before they were keyed by node: nothing counted twice', async () => {
    const counters = createReportCounters(redis.client, {
      dedupeSeconds: 3600,
      retentionSeconds: 3600,
    });
    const tag = 'default/upgraded-reporter/uid-4';
    const k = (name: string) => key('status', hashTag(tag), name);
    // What the previous version left: one reporter's counters, keyed by its id alone.
    await redis.client.hset(k('reporters'), {
      'edge-pod:1|uploaded': 30,
      'edge-pod:1|inferenceNumber': 300,
      'edge-pod:1|hardExampleNumber': 30,
    });
    await redis.client.hset(k('totals'), {
      uploaded: 30,
      inferenceNumber: 300,
      hardExampleNumber: 30,
    });
    const edge = { node: 'edge0', id: 'edge-pod:1' };
    // A late report below what was recorded moves nothing; the next one moves by the difference.
    await counters.record(tag, { source: 's', id: '1' }, edge, message(20, 200), '');
    expect((await counters.totals(tag)).counters.inferenceNumber).toBe(300);
    await counters.record(tag, { source: 's', id: '2' }, edge, message(31, 310), '');
    expect((await counters.totals(tag)).counters).toEqual({
      uploaded: 31,
      inferenceNumber: 310,
      hardExampleNumber: 31,
      shadowNumber: 0,
    });
    expect(Object.keys(await redis.client.hgetall(k('reporters'))).sort()).toEqual([
      'edge0|edge|edge-pod:1|hardExampleNumber',
      'edge0|edge|edge-pod:1|inferenceNumber',
      'edge0|edge|edge-pod:1|uploaded',
    ]);
  });

  it('totals shadowNumber per reporter, once per report however often it is resent', async () => {
    const counters = createReportCounters(redis.client, {
      dedupeSeconds: 3600,
      retentionSeconds: 3600,
    });
    const tag = 'default/shadowed/uid-5';
    const pod = { node: 'edge0', id: 'edge-pod:1' };
    const other = { node: 'edge0', id: 'edge-pod:2' };
    const record = (id: string, reporter: typeof pod, message: WorkerMessage) =>
      counters.record(tag, { source: 'node/edge0', id }, reporter, message, '');
    expect(await record('1', pod, shadowed(100, 5))).toBe(true);
    // The same report again, under the same id: recorded once.
    expect(await record('1', pod, shadowed(100, 5))).toBe(false);
    // A late, smaller report of the same process moves nothing; another process adds its own.
    expect(await record('2', pod, shadowed(90, 4))).toBe(true);
    expect(await record('3', other, shadowed(50, 2))).toBe(true);
    expect(await record('4', pod, shadowed(120, 9))).toBe(true);
    expect((await counters.totals(tag)).counters).toMatchObject({
      inferenceNumber: 170,
      shadowNumber: 11,
    });
  });

  it('keeps the latest quality report, whole, and only a later one replaces it', async () => {
    const counters = createReportCounters(redis.client, {
      dedupeSeconds: 3600,
      retentionSeconds: 3600,
    });
    const tag = 'default/quality/uid-6';
    const pod = { node: 'edge0', id: 'edge-pod:1' };
    const record = (id: string, message: WorkerMessage, at: string) =>
      counters.record(tag, { source: 'node/edge0', id }, pod, message, at);
    expect((await counters.totals(tag)).quality).toBeUndefined();

    const first = qualityReport;
    await record('1', shadowed(100, 5, first), '2026-11-22T10:00:01.000Z');
    expect((await counters.totals(tag)).quality).toEqual({
      ...first,
      reportTime: '2026-11-22T10:00:01.000Z',
    });

    // A report without quality leaves it as it was.
    await record('2', shadowed(110, 6), '2026-11-22T10:00:02.000Z');
    expect((await counters.totals(tag)).quality?.reportTime).toBe('2026-11-22T10:00:01.000Z');

    // A later one replaces all of it: what it no longer says is gone.
    const second: WorkerQuality = {
      estimatedEdgeAccuracy: 0.1 + 0.2,
      driftScore: 1.5,
      drifting: false,
    };
    await record('3', shadowed(120, 7, second), '2026-11-22T10:00:03.000Z');
    expect((await counters.totals(tag)).quality).toEqual({
      ...second,
      reportTime: '2026-11-22T10:00:03.000Z',
    });

    // One received earlier but recorded after it (a slower replica) does not take its place.
    await record('4', shadowed(115, 6, first), '2026-11-22T10:00:02.500Z');
    expect((await counters.totals(tag)).quality).toEqual({
      ...second,
      reportTime: '2026-11-22T10:00:03.000Z',
    });
    expect((await counters.totals(tag)).counters).toMatchObject({
      inferenceNumber: 120,
      shadowNumber: 7,
    });
  });
});
