/** Loading Brokers, Triggers and PingSources from YAML, and refusing what a cluster would. */
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../../shared/errors/index.js';
import { loadEventing, parseIsoDuration } from '../../../local/broker/index.js';
import { repositoryEventing } from './harness.js';

function trigger(spec: string): string {
  return `apiVersion: eventing.knative.dev/v1
kind: Trigger
metadata: { name: t, namespace: ns }
spec:
  broker: default
  subscriber: { uri: 'http://example.test/' }
${spec}`;
}

function refusal(texts: string[]): string {
  try {
    loadEventing(texts);
  } catch (err) {
    expect(err).toBeInstanceOf(ValidationError);
    return (err as Error).message;
  }
  throw new Error('expected loadEventing to refuse');
}

describe('loadEventing', () => {
  it("reads the repository's knative/eventing files, skipping the ApiServerSources", () => {
    const { brokers, triggers, pingSources } = loadEventing(repositoryEventing());
    expect(brokers).toEqual([
      {
        namespace: 'edgeai-system',
        name: 'default',
        delivery: undefined,
      },
    ]);
    expect(triggers.map((t) => t.name).sort()).toEqual([
      'aset-scheduler-ping',
      'aset-scheduler-responses-reported',
      'aset-scheduler-stream-ended',
      'aset-scheduler-stream-requested',
      'downstream-sync-add',
      'downstream-sync-delete',
      'downstream-sync-ping',
      'downstream-sync-update',
      'reconcile-tick-add',
      'reconcile-tick-delete',
      'reconcile-tick-fl-round-completed',
      'reconcile-tick-ping',
      'reconcile-tick-update',
      'upstream-status-reported',
    ]);
    const add = triggers.find((t) => t.name === 'reconcile-tick-add')!;
    expect(add).toEqual({
      namespace: 'edgeai-system',
      name: 'reconcile-tick-add',
      broker: 'default',
      filter: {
        kind: 'attributes',
        attributes: { type: 'dev.knative.apiserver.resource.add', edgeaiwatch: 'reconcile' },
      },
      subscriber: {
        ref: {
          apiVersion: 'serving.knative.dev/v1',
          kind: 'Service',
          name: 'reconcile-tick',
          namespace: 'edgeai-system',
        },
      },
      delivery: {
        retry: 5,
        backoffPolicy: 'exponential',
        backoffDelayMs: 500,
        timeoutMs: undefined,
        deadLetterSink: undefined,
      },
    });
    expect(pingSources.map((p) => [p.name, p.schedule.expression, p.data.toString()])).toEqual([
      ['reconcile-tick', '* * * * *', '{"tick":"reconcile"}'],
      ['aset-scheduler', '* * * * *', '{"tick":"aset"}'],
      ['downstream-sync', '* * * * *', '{"tick":"sync"}'],
    ]);
    expect(pingSources[0]!.sink.ref).toEqual({
      apiVersion: 'eventing.knative.dev/v1',
      kind: 'Broker',
      name: 'default',
      namespace: 'edgeai-system',
    });
    expect(pingSources[0]!.contentType).toBe('application/json');
  });

  it('reads the filters dialects, delivery defaults, dead-letter sinks and namespaces', () => {
    const { brokers, triggers } = loadEventing(
      [
        `apiVersion: eventing.knative.dev/v1
kind: Broker
metadata: { name: b }
spec:
  delivery:
    retry: 2
    backoffPolicy: linear
    backoffDelay: PT1M0.25S
    timeout: PT2S
    deadLetterSink: { ref: { apiVersion: serving.knative.dev/v1, kind: Service, name: dls }, uri: /dead }
---
apiVersion: eventing.knative.dev/v1
kind: Trigger
metadata: { name: t }
spec:
  broker: b
  filter: { attributes: { type: ignored } }
  filters:
    - prefix: { type: io.edgeai. }
    - not: { exact: { source: x } }
    - any: [{ suffix: { type: .bound } }, { all: [{ exact: { a: b } }] }]
    - {}
  subscriber: { ref: { apiVersion: v1, kind: Service, name: s, namespace: other } }
---
apiVersion: tekton.dev/v1
kind: Trigger
metadata: { name: not-knative }
`,
      ],
      { defaultNamespace: 'dev' },
    );
    expect(brokers[0]).toEqual({
      namespace: 'dev',
      name: 'b',
      delivery: {
        retry: 2,
        backoffPolicy: 'linear',
        backoffDelayMs: 60_250,
        timeoutMs: 2000,
        deadLetterSink: {
          ref: {
            apiVersion: 'serving.knative.dev/v1',
            kind: 'Service',
            name: 'dls',
            namespace: 'dev',
          },
          uri: '/dead',
        },
      },
    });
    expect(triggers).toHaveLength(1);
    expect(triggers[0]!.subscriber.ref?.namespace).toBe('other');
    expect(triggers[0]!.delivery).toBeUndefined();
    expect(triggers[0]!.filter).toEqual({
      kind: 'all',
      filters: [
        { kind: 'prefix', attribute: 'type', value: 'io.edgeai.' },
        { kind: 'not', filter: { kind: 'exact', attribute: 'source', value: 'x' } },
        {
          kind: 'any',
          filters: [
            { kind: 'suffix', attribute: 'type', value: '.bound' },
            { kind: 'all', filters: [{ kind: 'exact', attribute: 'a', value: 'b' }] },
          ],
        },
        { kind: 'pass' },
      ],
    });
  });

  it('refuses CESQL with a clear message', () => {
    expect(refusal([trigger('  filters: [{ cesql: "type = \'x\'" }]')])).toBe(
      'Trigger ns/t.spec.filters[0].cesql: CESQL expressions are not supported by the development broker: use exact, prefix, suffix, all, any or not',
    );
  });

  it('refuses what the Knative webhook refuses, naming the field', () => {
    expect(
      refusal([trigger('  filters: [{ exact: { type: a }, prefix: { source: b } }]')]),
    ).toMatch(/^Trigger ns\/t\.spec\.filters\[0\]: multiple dialects found \(exact, prefix\)/);
    expect(refusal([trigger('  filters: [{ exact: { type: a, source: b } }]')])).toMatch(
      /^Trigger ns\/t\.spec\.filters\[0\]\.exact: exact takes one attribute/,
    );
    expect(refusal([trigger('  filters: [{ exacts: { type: a } }]')])).toMatch(
      /^Trigger ns\/t\.spec\.filters\[0\]: Unrecognized key: "exacts"/,
    );
    expect(refusal([trigger('  filter: { attributes: { Type: a } }')])).toMatch(
      /^Trigger ns\/t\.spec\.filter\.attributes\.Type: .*attribute names must start with a letter/,
    );
    expect(
      refusal([
        trigger('  delivery: { retry: 1, backoffPolicy: exponential, backoffDelay: 500ms }'),
      ]),
    ).toMatch(/^Trigger ns\/t\.spec\.delivery\.backoffDelay: "500ms" is not an ISO-8601 duration/);
    expect(refusal([trigger('  delivery: { backoffPolicy: random }')])).toMatch(
      /^Trigger ns\/t\.spec\.delivery\.backoffPolicy: /,
    );
    expect(
      refusal([
        `apiVersion: eventing.knative.dev/v1
kind: Trigger
metadata: { name: t, namespace: ns }
spec: { broker: b, subscriber: { uri: relative/path } }`,
      ]),
    ).toBe('Trigger ns/t.spec.subscriber.uri: uri must be an absolute URL when there is no ref');
    expect(refusal([trigger(''), trigger('')])).toBe('Trigger ns/t: defined twice');
    expect(refusal(['kind: [unclosed'])).toMatch(/^YAML text 1, document 1: /);
  });

  it('refuses PingSource schedules and time zones it cannot run', () => {
    const ping = (spec: string) => `apiVersion: sources.knative.dev/v1
kind: PingSource
metadata: { name: p, namespace: ns }
spec:
  sink: { ref: { apiVersion: eventing.knative.dev/v1, kind: Broker, name: default } }
${spec}`;
    expect(refusal([ping("  schedule: '*/0 * * * *'")])).toMatch(
      /^PingSource ns\/p\.spec\.schedule: schedule "\*\/0 \* \* \* \*": .*cannot repeat at every 0/,
    );
    expect(refusal([ping("  schedule: '0 9 * * *'\n  timezone: Europe/Paris")])).toMatch(
      /^PingSource ns\/p\.spec\.timezone: the development broker runs schedules in UTC only/,
    );
    expect(refusal([ping("  schedule: '@every 1m'")])).toMatch(/unsupported descriptor/);
    expect(refusal([ping("  schedule: '* * * * *'\n  data: a\n  dataBase64: YQ==")])).toMatch(
      /data and dataBase64 are mutually exclusive/,
    );
    const loaded = loadEventing([ping("  schedule: '@hourly'\n  dataBase64: AAEC")]);
    expect(loaded.pingSources[0]!.data).toEqual(Buffer.from([0, 1, 2]));
    expect(loaded.pingSources[0]!.contentType).toBeUndefined();
  });
});

describe('parseIsoDuration', () => {
  it('reads weeks, days, hours, minutes and fractional seconds', () => {
    expect(parseIsoDuration('PT0.5S')).toBe(500);
    expect(parseIsoDuration('PT1S')).toBe(1000);
    expect(parseIsoDuration('PT1M30S')).toBe(90_000);
    expect(parseIsoDuration('PT0.001S')).toBe(1);
    expect(parseIsoDuration('P1DT2H')).toBe(26 * 3_600_000);
    expect(parseIsoDuration('P1W')).toBe(7 * 24 * 3_600_000);
    expect(parseIsoDuration('PT0S')).toBe(0);
  });

  it('refuses what is not a duration, and years and months', () => {
    for (const text of ['', 'P', 'PT', '0.5S', 'PT-1S', 'PT1.S', '1s', 'PT1S ']) {
      expect(parseIsoDuration(text), text).toBeInstanceOf(Error);
    }
    expect(String(parseIsoDuration('P1M'))).toMatch(/years and months are not supported/);
  });
});
