/**
 * PingSources from the repository's knative/eventing/pingsource.yaml: ticks through the
 * development broker reach only the function whose Trigger names that source; the cron schedule
 * itself, on fake timers.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createDevBroker, loadEventing, startPingSources } from '../../../local/broker/index.js';
import type { BrokerEvent, DevBroker, PingRecord } from '../../../local/broker/index.js';
import { repositoryEventing, servicesResolver, subscriber } from './harness.js';
import type { Subscriber } from './harness.js';

const functions = ['reconcile-tick', 'downstream-sync', 'upstream-status', 'aset-scheduler'];
const pingType = 'dev.knative.sources.ping';
const sourceOf = (name: string) => `/apis/v1/namespaces/edgeai-system/pingsources/${name}`;

describe('PingSources through the development broker', () => {
  const subs: Record<string, Subscriber> = {};
  let broker: DevBroker;
  const manifests = loadEventing(repositoryEventing());

  beforeAll(async () => {
    for (const name of functions) subs[name] = await subscriber();
    broker = createDevBroker({
      manifests,
      resolve: servicesResolver(
        Object.fromEntries(functions.map((name) => [name, subs[name]!.url])),
      ),
    });
  });
  afterAll(async () => {
    await broker.close();
    for (const sub of Object.values(subs)) await sub.close();
  });

  const pings = (name: string) =>
    subs[name]!.received.filter((r) => r.headers['ce-type'] === pingType);

  it('ticks every N ms when asked, each function getting its own source only', async () => {
    const ticks: PingRecord[] = [];
    const sources = startPingSources({
      sources: manifests.pingSources,
      broker,
      everyMs: 25,
      onTick: (record) => ticks.push(record),
    });
    try {
      // Three ticks of each PingSource.
      await Promise.all(
        ['reconcile-tick', 'aset-scheduler'].map((name) =>
          subs[name]!.arrived.when(() => pings(name).length >= 3),
        ),
      );
    } finally {
      sources.stop();
    }
    await broker.idle();
    for (const tick of pings('reconcile-tick')) {
      expect(tick.headers).toMatchObject({
        'ce-specversion': '1.0',
        'ce-source': sourceOf('reconcile-tick'),
        'content-type': 'application/json',
      });
      expect(tick.headers['ce-id']).toMatch(/^[0-9a-f-]{36}$/);
      expect(Number.isNaN(Date.parse(String(tick.headers['ce-time'])))).toBe(false);
      expect(JSON.parse(tick.body)).toEqual({ tick: 'reconcile' });
    }
    for (const tick of pings('aset-scheduler')) {
      expect(tick.headers['ce-source']).toBe(sourceOf('aset-scheduler'));
      expect(JSON.parse(tick.body)).toEqual({ tick: 'aset' });
    }
    for (const tick of pings('downstream-sync')) {
      expect(tick.headers['ce-source']).toBe(sourceOf('downstream-sync'));
      expect(JSON.parse(tick.body)).toEqual({ tick: 'sync' });
    }
    expect(pings('upstream-status')).toEqual([]);
    expect(new Set(ticks.map((t) => t.outcome))).toEqual(new Set(['accepted']));
  });

  it('fires one tick on demand', async () => {
    const sources = startPingSources({
      sources: manifests.pingSources,
      broker,
      everyMs: 3_600_000,
    });
    const before = pings('aset-scheduler').length;
    const record = await sources.fire('edgeai-system', 'aset-scheduler');
    sources.stop();
    expect(record).toMatchObject({ source: 'edgeai-system/aset-scheduler', outcome: 'accepted' });
    await broker.idle();
    expect(pings('aset-scheduler')).toHaveLength(before + 1);
    await expect(sources.fire('edgeai-system', 'nope')).rejects.toThrow(
      'no PingSource edgeai-system/nope',
    );
  });
});

describe('PingSource schedule', () => {
  it('fires on the cron schedule, with the tick time as the event time', async () => {
    vi.useFakeTimers({ now: new Date('2026-03-01T10:00:30.000Z') });
    try {
      const got: Array<{ ns: string; name: string; event: BrokerEvent }> = [];
      const { pingSources } = loadEventing([
        `apiVersion: sources.knative.dev/v1
kind: PingSource
metadata: { name: quarter, namespace: dev }
spec:
  schedule: '*/15 * * * *'
  data: hello
  contentType: text/plain
  ceOverrides: { extensions: { edgeaiclock: quarter } }
  sink: { ref: { apiVersion: eventing.knative.dev/v1, kind: Broker, name: default } }
`,
      ]);
      const sources = startPingSources({
        sources: pingSources,
        broker: {
          ingest: (ns, name, event) => {
            got.push({ ns, name, event });
            return 'accepted';
          },
        },
      });
      await vi.advanceTimersByTimeAsync(14 * 60_000);
      expect(got).toEqual([]);
      await vi.advanceTimersByTimeAsync(60_000);
      expect(got).toHaveLength(1);
      expect(got[0]!.ns).toBe('dev');
      expect(got[0]!.name).toBe('default');
      expect(got[0]!.event.attributes).toMatchObject({
        type: pingType,
        source: '/apis/v1/namespaces/dev/pingsources/quarter',
        time: '2026-03-01T10:15:00.000Z',
        datacontenttype: 'text/plain',
        edgeaiclock: 'quarter',
      });
      expect(got[0]!.event.data.toString()).toBe('hello');
      await vi.advanceTimersByTimeAsync(30 * 60_000);
      expect(got.map((g) => g.event.attributes['time'])).toEqual([
        '2026-03-01T10:15:00.000Z',
        '2026-03-01T10:30:00.000Z',
        '2026-03-01T10:45:00.000Z',
      ]);
      sources.stop();
      await vi.advanceTimersByTimeAsync(60 * 60_000);
      expect(got).toHaveLength(3);
    } finally {
      vi.useRealTimers();
    }
  });

  it('leaves no timer to tick once stopped (every N ms too)', async () => {
    vi.useFakeTimers();
    try {
      const got: string[] = [];
      const sources = startPingSources({
        sources: loadEventing(repositoryEventing()).pingSources,
        broker: {
          ingest: (_ns, _name, event) => {
            got.push(String(event.attributes['source']));
            return 'accepted';
          },
        },
        everyMs: 25,
      });
      await vi.advanceTimersByTimeAsync(100);
      expect(got.length).toBeGreaterThan(0);
      sources.stop();
      expect(vi.getTimerCount()).toBe(0);
      const after = got.length;
      await vi.advanceTimersByTimeAsync(60 * 60_000);
      expect(got).toHaveLength(after);
    } finally {
      vi.useRealTimers();
    }
  });

  it('sends to a sink that is not a Broker over HTTP, once', async () => {
    const sink = await subscriber(() => ({ status: 503 }));
    try {
      const { pingSources } = loadEventing([
        `apiVersion: sources.knative.dev/v1
kind: PingSource
metadata: { name: direct, namespace: dev }
spec:
  schedule: '* * * * *'
  data: '{"x":1}'
  contentType: application/json
  sink: { ref: { apiVersion: serving.knative.dev/v1, kind: Service, name: fn }, uri: /hook }
`,
      ]);
      const sources = startPingSources({
        sources: pingSources,
        broker: { ingest: () => 'not-found' },
        resolve: servicesResolver({ fn: sink.url }),
      });
      const record = await sources.fire('dev', 'direct');
      sources.stop();
      expect(record).toMatchObject({
        outcome: 'failed',
        detail: `POST ${sink.url}/hook answered 503`,
      });
      expect(sink.received).toHaveLength(1);
      expect(sink.received[0]!.headers['ce-source']).toBe(
        '/apis/v1/namespaces/dev/pingsources/direct',
      );
    } finally {
      await sink.close();
    }
  });
});
