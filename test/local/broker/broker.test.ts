/**
 * The development broker over real HTTP: the repository's own Brokers and Triggers routing
 * control-plane events, the ingress contract, retries and dead letters, replies, the TTL loop
 * guard, and closing with retries pending. Subscribers are HTTP servers on ephemeral ports.
 */
import { createServer } from 'node:http';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createDevBroker, formatRecord, loadEventing } from '../../../local/broker/index.js';
import type { BrokerRecord, DevBroker } from '../../../local/broker/index.js';
import { postEvent } from '../../support/http.js';
import { signal } from '../../support/signal.js';
import type { Signal } from '../../support/signal.js';
import { repositoryEventing, servicesResolver, subscriber } from './harness.js';
import type { Answer, Received, Subscriber } from './harness.js';

const functions = ['reconcile-tick', 'downstream-sync', 'upstream-status', 'aset-scheduler'];

function jsonBody(received: Received): unknown {
  return JSON.parse(received.body) as unknown;
}

describe("the repository's Broker and Triggers", () => {
  const subs: Record<string, Subscriber> = {};
  const records: BrokerRecord[] = [];
  let broker: DevBroker;
  let ingress: string;
  let base: string;

  beforeAll(async () => {
    for (const name of functions) subs[name] = await subscriber();
    broker = createDevBroker({
      manifests: loadEventing(repositoryEventing()),
      resolve: servicesResolver(
        Object.fromEntries(functions.map((name) => [name, subs[name]!.url])),
      ),
      onEvent: (record) => records.push(record),
    });
    base = await broker.listen();
    ingress = `${base}/edgeai-system/default`;
  });
  afterAll(async () => {
    await broker.close();
    for (const sub of Object.values(subs)) await sub.close();
  });

  const counts = () => Object.fromEntries(functions.map((n) => [n, subs[n]!.received.length]));

  it('routes an ApiServerSource add with edgeaiwatch=reconcile to reconcile-tick only, and sync to downstream-sync only', async () => {
    const before = counts();
    const object = {
      apiVersion: 'edgeai.io/v1alpha1',
      kind: 'JointInferenceService',
      metadata: { name: 'demo', namespace: 'default' },
    };
    const subject = '/apis/edgeai.io/v1alpha1/namespaces/default/jointinferenceservices/demo';
    const reconcile = await postEvent(ingress, 'dev.knative.apiserver.resource.add', object, {
      'ce-id': 'jis-add-reconcile',
      'ce-subject': subject,
      'ce-edgeaiwatch': 'reconcile',
    });
    expect(reconcile.status).toBe(202);
    await broker.idle();
    expect(counts()).toEqual({ ...before, 'reconcile-tick': before['reconcile-tick']! + 1 });
    const got = subs['reconcile-tick']!.received.at(-1)!;
    expect(got.headers).toMatchObject({
      'ce-specversion': '1.0',
      'ce-id': 'jis-add-reconcile',
      'ce-type': 'dev.knative.apiserver.resource.add',
      'ce-source': 'https://kubernetes.default.svc',
      'ce-subject': subject,
      'ce-edgeaiwatch': 'reconcile',
      'content-type': 'application/json',
      prefer: 'reply',
    });
    // The loop guard is the broker's business: Knative's filter takes it off before delivery.
    expect(got.headers['ce-knativebrokerttl']).toBeUndefined();
    expect(jsonBody(got)).toEqual(object);
    const delivered = records.filter(
      (r) => r.kind === 'delivered' && r.event.attributes['id'] === 'jis-add-reconcile',
    );
    expect(delivered).toMatchObject([
      {
        trigger: 'edgeai-system/reconcile-tick-add',
        url: subs['reconcile-tick']!.url,
        status: 202,
        attempts: 1,
      },
    ]);

    const sync = await postEvent(ingress, 'dev.knative.apiserver.resource.add', object, {
      'ce-id': 'jis-add-sync',
      'ce-subject': subject,
      'ce-edgeaiwatch': 'sync',
    });
    expect(sync.status).toBe(202);
    await broker.idle();
    expect(counts()).toEqual({
      ...before,
      'reconcile-tick': before['reconcile-tick']! + 1,
      'downstream-sync': before['downstream-sync']! + 1,
    });
    expect(subs['downstream-sync']!.received.at(-1)!.headers).toMatchObject({
      'ce-id': 'jis-add-sync',
      'ce-edgeaiwatch': 'sync',
    });
    expect(
      records.filter((r) => r.kind === 'delivered' && r.event.attributes['id'] === 'jis-add-sync'),
    ).toMatchObject([
      { trigger: 'edgeai-system/downstream-sync-add', url: subs['downstream-sync']!.url },
    ]);
  });

  it('delivers a structured-mode event in binary mode, data and extensions intact', async () => {
    const before = subs['upstream-status']!.received.length;
    const response = await fetch(ingress, {
      method: 'POST',
      headers: { 'content-type': 'application/cloudevents+json; charset=utf-8' },
      body: JSON.stringify({
        specversion: '1.0',
        id: 'report-1',
        source: 'edge-node-1',
        type: 'io.edgeai.jointinference.status.reported',
        subject: 'default/jointinferenceservices/demo',
        time: '2026-01-01T00:00:00.000Z',
        edgeainode: 'node-1',
        data: { id: 'r1', phase: 'Inference', note: 'ünïcode' },
      }),
    });
    expect(response.status).toBe(202);
    await broker.idle();
    expect(subs['upstream-status']!.received).toHaveLength(before + 1);
    const got = subs['upstream-status']!.received.at(-1)!;
    expect(got.headers).toMatchObject({
      'ce-id': 'report-1',
      'ce-source': 'edge-node-1',
      'ce-time': '2026-01-01T00:00:00.000Z',
      'ce-subject': 'default/jointinferenceservices/demo',
      'ce-edgeainode': 'node-1',
      'content-type': 'application/json',
    });
    expect(jsonBody(got)).toEqual({ id: 'r1', phase: 'Inference', note: 'ünïcode' });
  });

  it('records an event no Trigger wants as unmatched', async () => {
    const before = counts();
    const response = await postEvent(
      ingress,
      'io.edgeai.aset.stream.bound',
      { stream: 's' },
      {
        'ce-id': 'nobody-wants-this',
      },
    );
    expect(response.status).toBe(202);
    await broker.idle();
    expect(counts()).toEqual(before);
    expect(
      records.find(
        (r) => r.event.attributes['id'] === 'nobody-wants-this' && r.kind === 'unmatched',
      ),
    ).toBeDefined();
  });

  it('answers 400 naming the problem, 404 for an unknown broker, 405 for another method', async () => {
    const plain = await fetch(ingress, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"not":"an event"}',
    });
    expect(plain.status).toBe(400);
    expect(await plain.json()).toMatchObject({
      error: {
        status: 400,
        reason: 'ValidationError',
        message: expect.stringMatching(/^the request is not a CloudEvent/) as unknown,
      },
    });
    const noId = await fetch(ingress, {
      method: 'POST',
      headers: { 'ce-specversion': '1.0', 'ce-source': 's', 'ce-type': 't' },
      body: '{}',
    });
    expect(noId.status).toBe(400);
    expect(((await noId.json()) as { error: { message: string } }).error.message).toMatch(/ce-id/);
    const badJson = await fetch(ingress, {
      method: 'POST',
      headers: { 'content-type': 'application/cloudevents+json' },
      body: '{"specversion":',
    });
    expect(badJson.status).toBe(400);

    const unknown = await postEvent(`${base}/edgeai-system/other`, 'x', {});
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { error: { message: string } }).error.message).toBe(
      'broker edgeai-system/other does not exist',
    );
    expect((await postEvent(`${base}/edgeai-system`, 'x', {})).status).toBe(404);
    const get = await fetch(ingress);
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');
  });
});

/** A broker over YAML written in the test, with Knative Services resolved from `services`. */
async function devBroker(
  yaml: string,
  services: Record<string, string | (() => string | undefined)>,
  records: BrokerRecord[],
): Promise<{ broker: DevBroker; ingress: string; recorded: Signal }> {
  const recorded = signal();
  const broker = createDevBroker({
    manifests: loadEventing([yaml]),
    resolve: (ref) => {
      const found = services[ref.name];
      return typeof found === 'function' ? found() : found;
    },
    onEvent: (record) => {
      records.push(record);
      recorded.changed();
    },
  });
  const base = await broker.listen();
  return { broker, ingress: `${base}/dev/default`, recorded };
}

const brokerYaml = `apiVersion: eventing.knative.dev/v1
kind: Broker
metadata: { name: default, namespace: dev }
`;

function triggerYaml(name: string, type: string, subscriberSpec: string, delivery = ''): string {
  return `---
apiVersion: eventing.knative.dev/v1
kind: Trigger
metadata: { name: ${name}, namespace: dev }
spec:
  broker: default
  filter: { attributes: { type: ${type} } }
  subscriber: ${subscriberSpec}
${delivery}`;
}

const service = (name: string) =>
  `{ ref: { apiVersion: serving.knative.dev/v1, kind: Service, name: ${name} } }`;

describe('delivery: retries, dead letters, drops', () => {
  const cleanup: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const close of cleanup.splice(0).reverse()) await close();
  });

  it('retries what Knative retries, then dead-letters with the error extensions, else drops', async () => {
    const flaky = await subscriber(() => ({ status: 503, body: 'busy' }));
    const refusing = await subscriber(() => ({ status: 400, body: 'bad' }));
    const dls = await subscriber();
    const closed = createServer();
    closed.listen(0, '127.0.0.1');
    await new Promise((resolve) => closed.once('listening', resolve));
    const address = closed.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    await new Promise((resolve) => closed.close(resolve));
    let calls = 0;
    const starting = await subscriber();
    cleanup.push(
      () => flaky.close(),
      () => refusing.close(),
      () => dls.close(),
      () => starting.close(),
    );

    const dead = `  delivery:
    retry: 2
    backoffPolicy: exponential
    backoffDelay: PT0.01S
    deadLetterSink: ${service('dls')}
`;
    const records: BrokerRecord[] = [];
    const { broker, ingress } = await devBroker(
      brokerYaml +
        triggerYaml('flaky', 'io.test.flaky', service('flaky'), dead) +
        triggerYaml('refused', 'io.test.refused', service('refusing'), dead) +
        triggerYaml('nodls', 'io.test.nodls', service('flaky'), '  delivery: { retry: 1 }\n') +
        triggerYaml(
          'down',
          'io.test.down',
          `{ uri: 'http://127.0.0.1:${address.port}/' }`,
          '  delivery: { retry: 1 }\n',
        ) +
        triggerYaml(
          'starting',
          'io.test.starting',
          service('starting'),
          '  delivery: { retry: 3, backoffPolicy: linear, backoffDelay: PT0.01S }\n',
        ),
      {
        flaky: flaky.url,
        refusing: refusing.url,
        dls: dls.url,
        // Not running for its first two attempts, as a function still starting.
        starting: () => (++calls > 2 ? starting.url : undefined),
      },
      records,
    );
    cleanup.push(() => broker.close());
    const of = (id: string) => records.filter((r) => r.event.attributes['id'] === id);

    expect(
      (await postEvent(ingress, 'io.test.flaky', { n: 1 }, { 'ce-id': 'flaky-1' })).status,
    ).toBe(202);
    await broker.idle();
    expect(flaky.received).toHaveLength(3);
    expect(of('flaky-1').map((r) => r.kind)).toEqual([
      'accepted',
      'retried',
      'retried',
      'dead-lettered',
    ]);
    expect(of('flaky-1').filter((r) => r.kind === 'retried')).toMatchObject([
      { retry: 1, status: 503, delayMs: 10, target: 'subscriber', url: flaky.url },
      { retry: 2, status: 503, delayMs: 20, target: 'subscriber', url: flaky.url },
    ]);
    expect(dls.received).toHaveLength(1);
    expect(dls.received[0]!.headers).toMatchObject({
      'ce-id': 'flaky-1',
      'ce-type': 'io.test.flaky',
      'ce-knativeerrorcode': '503',
      'ce-knativeerrordest': flaky.url,
      'ce-knativeerrordata': Buffer.from('busy').toString('base64'),
    });
    expect(jsonBody(dls.received[0]!)).toEqual({ n: 1 });

    // 400 is not retried: straight to the dead-letter sink.
    await postEvent(ingress, 'io.test.refused', {}, { 'ce-id': 'refused-1' });
    await broker.idle();
    expect(refusing.received).toHaveLength(1);
    expect(of('refused-1').map((r) => r.kind)).toEqual(['accepted', 'dead-lettered']);
    expect(dls.received.at(-1)!.headers['ce-knativeerrorcode']).toBe('400');

    // No dead-letter sink: dropped, and counted.
    await postEvent(ingress, 'io.test.nodls', {}, { 'ce-id': 'nodls-1' });
    await broker.idle();
    expect(of('nodls-1').map((r) => r.kind)).toEqual(['accepted', 'retried', 'dropped']);
    expect(of('nodls-1').at(-1)).toMatchObject({
      reason: 'undeliverable',
      detail: `POST ${flaky.url} answered 503 (2 attempts)`,
    });

    // A network error is retried too.
    await postEvent(ingress, 'io.test.down', {}, { 'ce-id': 'down-1' });
    await broker.idle();
    expect(of('down-1').map((r) => r.kind)).toEqual(['accepted', 'retried', 'dropped']);
    expect(of('down-1')[1]).toMatchObject({
      status: undefined,
      error: expect.any(String) as unknown,
    });

    // A subscriber with no address yet is retried like a 404, until it has one.
    await postEvent(ingress, 'io.test.starting', {}, { 'ce-id': 'starting-1' });
    await broker.idle();
    expect(of('starting-1').map((r) => r.kind)).toEqual([
      'accepted',
      'retried',
      'retried',
      'delivered',
    ]);
    expect(of('starting-1')[1]).toMatchObject({
      url: undefined,
      error: 'Service dev/starting (serving.knative.dev/v1) has no address',
      delayMs: 0,
    });
    expect(of('starting-1').at(-1)).toMatchObject({ attempts: 3, url: starting.url });

    expect(broker.counters()).toMatchObject({
      accepted: 5,
      delivered: 1,
      deadLettered: 2,
      retried: 6,
      dropped: 2,
      droppedBy: { undeliverable: 2, 'ttl-exhausted': 0 },
    });
    for (const record of records) expect(formatRecord(record)).toEqual(expect.any(String));
  });

  it('refuses a body over the limit with 413', async () => {
    const broker = createDevBroker({
      manifests: loadEventing([brokerYaml]),
      resolve: () => undefined,
      bodyLimitBytes: 16,
    });
    cleanup.push(() => broker.close());
    const base = await broker.listen();
    const response = await postEvent(`${base}/dev/default`, 'io.test.big', {
      text: 'x'.repeat(100),
    });
    expect(response.status).toBe(413);
    expect(broker.counters().accepted).toBe(0);
  });

  it('gives up on an attempt after the delivery timeout', async () => {
    const hanging = createServer(() => {});
    hanging.listen(0, '127.0.0.1');
    await new Promise((resolve) => hanging.once('listening', resolve));
    const address = hanging.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    cleanup.push(async () => {
      hanging.closeAllConnections();
      await new Promise((resolve) => hanging.close(resolve));
    });
    const records: BrokerRecord[] = [];
    const { broker, ingress } = await devBroker(
      brokerYaml +
        triggerYaml(
          'slow',
          'io.test.slow',
          `{ uri: 'http://127.0.0.1:${address.port}/' }`,
          '  delivery: { timeout: PT0.2S }\n',
        ),
      {},
      records,
    );
    cleanup.push(() => broker.close());
    await postEvent(ingress, 'io.test.slow', {});
    await broker.idle();
    expect(records.at(-1)).toMatchObject({
      kind: 'dropped',
      reason: 'undeliverable',
      detail: expect.stringContaining('no answer within 200 ms') as unknown,
    });
  });

  it('abandons pending retries when closed', async () => {
    const flaky = await subscriber(() => ({ status: 500 }));
    cleanup.push(() => flaky.close());
    const records: BrokerRecord[] = [];
    const { broker, ingress, recorded } = await devBroker(
      brokerYaml +
        triggerYaml(
          'slow-retries',
          'io.test.flaky',
          service('flaky'),
          '  delivery: { retry: 5, backoffPolicy: exponential, backoffDelay: PT1H }\n',
        ),
      { flaky: flaky.url },
      records,
    );
    await postEvent(ingress, 'io.test.flaky', {});
    // The first retry is scheduled (an hour away).
    await recorded.when(() => records.some((r) => r.kind === 'retried'));
    await broker.close();
    expect(records.at(-1)).toMatchObject({ kind: 'dropped', reason: 'closed' });
    expect(broker.counters().droppedBy.closed).toBe(1);
  });
});

describe('replies and the TTL loop guard', () => {
  const cleanup: Array<() => Promise<void>> = [];
  afterAll(async () => {
    for (const close of cleanup.reverse()) await close();
  });

  it('puts a 200 reply back into the broker, where a second Trigger gets it', async () => {
    const answerer = await subscriber((request): Answer => {
      const kind = request.headers['ce-subject'];
      if (kind === 'binary') {
        return {
          status: 200,
          headers: {
            'ce-specversion': '1.0',
            'ce-id': 'answer-1',
            'ce-source': '/answerer',
            'ce-type': 'io.test.answer',
            'content-type': 'application/json',
          },
          body: '{"answer":42}',
        };
      }
      if (kind === 'structured') {
        return {
          status: 200,
          headers: { 'content-type': 'application/cloudevents+json' },
          body: JSON.stringify({
            specversion: '1.0',
            id: 'answer-2',
            source: '/answerer',
            type: 'io.test.answer',
            data: { answer: 43 },
          }),
        };
      }
      if (kind === 'invalid') {
        return {
          status: 200,
          headers: { 'ce-specversion': '1.0', 'ce-id': 'x', 'ce-source': '/a' },
          body: '{}',
        };
      }
      return {
        status: 200,
        headers: { 'content-type': 'application/json' },
        body: '{"plain":true}',
      };
    });
    const listener = await subscriber();
    cleanup.push(
      () => answerer.close(),
      () => listener.close(),
    );
    const records: BrokerRecord[] = [];
    const { broker, ingress } = await devBroker(
      brokerYaml +
        triggerYaml('ask', 'io.test.ask', service('answerer')) +
        triggerYaml('hear', 'io.test.answer', service('listener')),
      { answerer: answerer.url, listener: listener.url },
      records,
    );
    cleanup.push(() => broker.close());

    await postEvent(ingress, 'io.test.ask', {}, { 'ce-subject': 'binary' });
    await broker.idle();
    expect(listener.received).toHaveLength(1);
    expect(listener.received[0]!.headers).toMatchObject({
      'ce-id': 'answer-1',
      'ce-source': '/answerer',
      'ce-type': 'io.test.answer',
    });
    expect(listener.received[0]!.headers['ce-knativebrokerttl']).toBeUndefined();
    expect(jsonBody(listener.received[0]!)).toEqual({ answer: 42 });
    expect(records.find((r) => r.kind === 'replied')?.event.attributes['knativebrokerttl']).toBe(
      '255',
    );
    expect(
      records.find((r) => r.kind === 'accepted' && r.event.attributes['id'] === 'answer-1'),
    ).toMatchObject({ ttl: 254 });

    await postEvent(ingress, 'io.test.ask', {}, { 'ce-subject': 'structured' });
    await broker.idle();
    expect(listener.received).toHaveLength(2);
    expect(listener.received[1]!.headers['ce-id']).toBe('answer-2');
    expect(jsonBody(listener.received[1]!)).toEqual({ answer: 43 });

    // 200 with a body that is not an event: delivered, nothing to re-ingest.
    await postEvent(ingress, 'io.test.ask', {}, { 'ce-subject': 'plain', 'ce-id': 'plain-1' });
    await broker.idle();
    expect(listener.received).toHaveLength(2);
    expect(
      records.filter((r) => r.event.attributes['id'] === 'plain-1').map((r) => r.kind),
    ).toEqual(['accepted', 'delivered']);

    // A malformed reply is dropped, named.
    await postEvent(ingress, 'io.test.ask', {}, { 'ce-subject': 'invalid' });
    await broker.idle();
    expect(records.at(-1)).toMatchObject({
      kind: 'dropped',
      reason: 'invalid-reply',
      detail: expect.stringMatching(
        /^the reply from .* is not a valid CloudEvent: .*ce-type/,
      ) as unknown,
    });
    expect(listener.received).toHaveLength(2);
  });

  it('stops a reply loop after 255 rounds, and sooner for an event that arrives with a TTL', async () => {
    const echo = await subscriber((request) => ({
      status: 200,
      headers: {
        'ce-specversion': '1.0',
        'ce-id': `${String(request.headers['ce-id'])}r`.slice(-200),
        'ce-source': String(request.headers['ce-source']),
        'ce-type': 'io.test.echo',
        'content-type': 'application/json',
      },
      body: '{}',
    }));
    cleanup.push(() => echo.close());
    const records: BrokerRecord[] = [];
    const { broker, ingress, recorded } = await devBroker(
      brokerYaml + triggerYaml('echo', 'io.test.echo', service('echo')),
      { echo: echo.url },
      records,
    );
    cleanup.push(() => broker.close());
    const deliveriesFrom = (source: string) =>
      echo.received.filter((r) => r.headers['ce-source'] === source).length;

    await postEvent(ingress, 'io.test.echo', {}, { 'ce-source': '/loop/full' });
    // The loop is stopped.
    await recorded.when(() =>
      records.some((r) => r.kind === 'dropped' && r.reason === 'ttl-exhausted'),
    );
    expect(broker.counters().droppedBy['ttl-exhausted']).toBe(1);
    await broker.idle();
    expect(deliveriesFrom('/loop/full')).toBe(255);
    expect(records.at(-1)).toMatchObject({
      kind: 'dropped',
      reason: 'ttl-exhausted',
      trigger: undefined,
    });

    // Arriving with knativebrokerttl 3: the ingress makes it 2, the reply 1, the next reply 0.
    await postEvent(
      ingress,
      'io.test.echo',
      {},
      { 'ce-source': '/loop/short', 'ce-knativebrokerttl': '3' },
    );
    await broker.idle();
    expect(deliveriesFrom('/loop/short')).toBe(2);
    expect(broker.counters().droppedBy['ttl-exhausted']).toBe(2);
  }, 60_000);
});
