/**
 * downstream-sync over HTTP with a real Redis, the development API server and a real HTTP
 * local controller: versioned, idempotent, acknowledged delivery of inserts, updates, deletes.
 */
import { createServer } from 'node:http';
import type { IncomingMessage } from 'node:http';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildServer, createHttpClient } from '../../../shared/http/index.js';
import type { KubeObject } from '../../../shared/k8s/index.js';
import {
  createDownstream,
  createLocalControllerClient,
  createTaskConsumer,
  createTaskStreams,
  downstreamSyncDefinition,
  localControllerAnnotation,
} from '../../../shared/sync/index.js';
import { startApiServer } from '../../support/apiserver.js';
import type { TestApiServer } from '../../support/apiserver.js';
import { capturedTelemetry, listen, postEvent } from '../../support/http.js';
import type { Listening } from '../../support/http.js';
import { testRedis } from '../../support/redis.js';
import type { TestRedis } from '../../support/redis.js';
import { helmetDetectionSample } from '../../support/samples.js';

interface Received {
  method: string;
  url: string;
  operation: string;
  body: string;
}

describe('downstream-sync', () => {
  let api: TestApiServer;
  let redis: TestRedis;
  let fn: Listening;
  let lc: Listening;
  const http = createHttpClient();
  const received: Received[] = [];
  let lcStatus = 200;

  const send = (type: string, data: unknown) =>
    postEvent(fn.url, `dev.knative.apiserver.resource.${type}`, data);
  const streamLength = (node: string) => redis.client.xlen(`tasks:{${node}}:stream`);

  beforeAll(async () => {
    api = await startApiServer();
    redis = await testRedis();
    const lcServer = createServer((req: IncomingMessage, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString()));
      req.on('end', () => {
        received.push({
          method: req.method ?? '',
          url: req.url ?? '',
          operation: String(req.headers['x-edgeai-operation']),
          body,
        });
        res.writeHead(lcStatus).end();
      });
    });
    lc = await listen(lcServer);
    await api.kube.create('node', undefined, {
      metadata: { name: 'edge0', annotations: { [localControllerAnnotation]: `${lc.url}/lc` } },
    });
    for (const node of ['edge1', 'edge2'])
      await api.kube.create('node', undefined, { metadata: { name: node, labels: { zone: 'a' } } });
    const downstream = createDownstream({
      kube: api.kube,
      redis: redis.client,
      streams: createTaskStreams(redis.client, { maxLength: 1000 }),
      localControllers: createLocalControllerClient({ timeoutMs: 2000, send: http.send }),
    });
    fn = await listen(
      buildServer(downstreamSyncDefinition({ downstream, readiness: [] }), {
        telemetry: capturedTelemetry('downstream-sync'),
        bodyLimitBytes: 1 << 20,
        readinessTimeoutMs: 1000,
      }),
    );
  });
  afterAll(async () => {
    await fn.close();
    http.close();
    await lc.close();
    await redis.close();
    await api.close();
  });
  beforeEach(() => {
    received.length = 0;
    lcStatus = 200;
  });

  it('delivers insert, update and delete once each, to the stream and the local controller', async () => {
    const created = await api.kube.create(
      'jointInferenceService',
      'default',
      helmetDetectionSample(),
    );
    const first = await send('add', created);
    expect(first.status).toBe(200);
    expect(first.headers.get('ce-type')).toBe('io.edgeai.jointinference.task.synced');
    expect(await first.json()).toMatchObject({
      generation: 1,
      deliveries: [
        { node: 'edge0', operation: 'insert', stream: 'appended', localController: 'delivered' },
      ],
    });
    expect(received).toEqual([
      expect.objectContaining({
        method: 'POST',
        url: '/lc/default/jointinferenceservices/helmet-detection-demo',
        operation: 'insert',
      }),
    ]);
    expect(JSON.parse(received[0]!.body)).toMatchObject({ spec: created['spec'] });

    // Redelivered, and a status-only update: nothing new anywhere.
    expect((await send('add', created)).status).toBe(202);
    const withStatus = await api.kube.patchStatus(
      { kind: 'jointInferenceService', namespace: 'default', name: created.metadata.name },
      { status: { uploadCount: 3 } },
    );
    expect((await send('update', withStatus)).status).toBe(202);
    expect(await streamLength('edge0')).toBe(1);
    expect(received).toHaveLength(1);

    const updated = await api.kube.patch(
      { kind: 'jointInferenceService', namespace: 'default', name: created.metadata.name },
      { spec: { edgeWorker: { hardExampleAlgorithm: { name: 'Threshold' } } } },
    );
    expect((await send('update', updated)).status).toBe(200);
    // The older event arriving late changes nothing.
    expect((await send('update', created)).status).toBe(202);
    expect((await send('delete', updated)).status).toBe(200);
    expect((await send('delete', updated)).status).toBe(202);
    expect(received.map((r) => [r.method, r.operation])).toEqual([
      ['POST', 'insert'],
      ['POST', 'update'],
      ['DELETE', 'delete'],
    ]);

    const consumer = await createTaskConsumer(redis.client, { node: 'edge0', consumer: 'lc-0' });
    const { tasks, lost } = await consumer.next(10);
    expect(lost).toBe(0);
    expect(tasks.map((t) => [t.operation, t.generation])).toEqual([
      ['insert', 1],
      ['update', 2],
      ['delete', 2],
    ]);
    expect(tasks[1]!.resource['spec']).toMatchObject({
      edgeWorker: { hardExampleAlgorithm: { name: 'Threshold' } },
    });
    await consumer.ack(tasks.map((t) => t.entryId));
  });

  it('keeps an unacknowledged task pending until acknowledged, also across a consumer restart', async () => {
    const created = await api.kube.create('jointInferenceService', 'default', {
      ...helmetDetectionSample(),
      metadata: { name: 'pending-demo' },
    });
    expect((await send('add', created)).status).toBe(200);
    const first = await createTaskConsumer(redis.client, { node: 'edge0', consumer: 'lc-1' });
    const [task] = (await first.next(10)).tasks.filter((t) => t.name === 'pending-demo');
    expect(task?.operation).toBe('insert');
    // The consumer crashed before acknowledging: it gets the task again when it comes back.
    const restarted = await createTaskConsumer(redis.client, { node: 'edge0', consumer: 'lc-1' });
    const { tasks: again } = await restarted.next(10);
    expect(again.map((t) => t.entryId)).toContain(task!.entryId);
    // Another consumer claims what a dead one left pending (claimIdleMs 0: idle at once).
    const other = await createTaskConsumer(redis.client, {
      node: 'edge0',
      consumer: 'lc-2',
      claimIdleMs: 0,
    });
    const { tasks: claimed } = await other.next(10);
    expect(claimed.map((t) => t.entryId)).toContain(task!.entryId);
    await other.ack(claimed.map((t) => t.entryId));
    expect(await other.next(10, 10)).toEqual({ tasks: [], lost: 0 });
  });

  it('answers 503 while the local controller fails, then delivers on redelivery without a second stream entry', async () => {
    const created = await api.kube.create('jointInferenceService', 'default', {
      ...helmetDetectionSample(),
      metadata: { name: 'lc-down' },
    });
    const before = await streamLength('edge0');
    lcStatus = 500;
    const failed = await send('add', created);
    expect(failed.status).toBe(503);
    expect(await failed.text()).toMatch(/local controller of node edge0 answered 500/);
    expect(await streamLength('edge0')).toBe(before + 1);
    lcStatus = 200;
    const retried = await send('add', created);
    expect(retried.status).toBe(200);
    expect(await retried.json()).toMatchObject({
      deliveries: [{ stream: 'unchanged', localController: 'delivered' }],
    });
    expect(await streamLength('edge0')).toBe(before + 1);
  });

  it('sends to every node a nodeSelector matches, and a delete to nodes it stops matching', async () => {
    const spec = helmetDetectionSample()['spec'] as { edgeWorker: Record<string, unknown> };
    delete spec.edgeWorker['nodeName'];
    spec.edgeWorker['nodeSelector'] = { zone: 'a' };
    const created: KubeObject = await api.kube.create('jointInferenceService', 'default', {
      metadata: { name: 'selected' },
      spec,
    });
    const first = (await (await send('add', created)).json()) as { deliveries: unknown[] };
    expect(first.deliveries).toEqual([
      expect.objectContaining({
        node: 'edge1',
        operation: 'insert',
        localController: 'not-configured',
      }),
      expect.objectContaining({ node: 'edge2', operation: 'insert' }),
    ]);
    await api.kube.patch({ kind: 'node', name: 'edge1' }, { metadata: { labels: { zone: 'b' } } });
    const updated = await api.kube.patch(
      { kind: 'jointInferenceService', namespace: 'default', name: 'selected' },
      { spec: { edgeWorker: { miningMode: 'mining-then-inference' } } },
    );
    const second = (await (await send('update', updated)).json()) as { deliveries: unknown[] };
    expect(second.deliveries).toEqual([
      expect.objectContaining({ node: 'edge2', operation: 'update' }),
      expect.objectContaining({ node: 'edge1', operation: 'delete' }),
    ]);
  });

  const currentOn = async (node: string) =>
    Object.keys(await redis.client.hgetall(`tasks:{${node}}:current`));
  const moveTo = (name: string, nodeName: string) =>
    api.kube.patch(
      { kind: 'jointInferenceService', namespace: 'default', name },
      { spec: { edgeWorker: { nodeName } } },
    );
  const named = (name: string) =>
    api.kube.create('jointInferenceService', 'default', {
      ...helmetDetectionSample(),
      metadata: { name },
    });

  it('follows a service that leaves a node and comes back (nodeName edge0 -> edge1 -> edge0)', async () => {
    const created = await named('roaming');
    expect((await send('add', created)).status).toBe(200);
    const away = await moveTo('roaming', 'edge1');
    expect((await send('update', away)).status).toBe(200);
    expect(await currentOn('edge0')).not.toContain('default/roaming');
    expect(await currentOn('edge1')).toContain('default/roaming');
    const back = await moveTo('roaming', 'edge0');
    const answer = (await (await send('update', back)).json()) as { deliveries: unknown[] };
    expect(answer.deliveries).toEqual([
      expect.objectContaining({ node: 'edge0', operation: 'insert', stream: 'appended' }),
      expect.objectContaining({ node: 'edge1', operation: 'delete', stream: 'appended' }),
    ]);
    expect(await currentOn('edge0')).toContain('default/roaming');
    expect(await currentOn('edge1')).not.toContain('default/roaming');
    expect(
      received.filter((r) => r.url.endsWith('/roaming')).map((r) => [r.method, r.operation]),
    ).toEqual([
      ['POST', 'insert'],
      ['DELETE', 'delete'],
      ['POST', 'insert'],
    ]);
  });

  it('lets no older event undo a move, delete the moved task or rewrite where the service is', async () => {
    const created = await named('moved');
    expect((await send('add', created)).status).toBe(200);
    const moved = await moveTo('moved', 'edge1');
    expect((await send('update', moved)).status).toBe(200);
    // Generation 1 arrives late: it wants edge0 and would have edge1 dropped.
    expect((await send('update', created)).status).toBe(202);
    expect(await currentOn('edge1')).toContain('default/moved');
    expect(await currentOn('edge0')).not.toContain('default/moved');
    expect(await redis.client.smembers('tasks:{default/moved}:nodes')).toEqual(['edge1']);
    // Redelivering generation 2 still finds everything in place.
    expect((await send('update', moved)).status).toBe(202);
    expect(await currentOn('edge1')).toContain('default/moved');
  });

  it('keeps a service deleted when its delete arrives before its add, telling the local controller nothing', async () => {
    const created = await named('ghost');
    await api.kube.delete({ kind: 'jointInferenceService', namespace: 'default', name: 'ghost' });
    expect((await send('delete', created)).status).toBe(202);
    expect((await send('add', created)).status).toBe(202);
    expect(await currentOn('edge0')).not.toContain('default/ghost');
    expect(received.filter((r) => r.url.endsWith('/ghost'))).toEqual([]);
  });

  it('lets no late event of a deleted object replace its successor of the same name', async () => {
    const first = await named('reborn');
    expect((await send('add', first)).status).toBe(200);
    await api.kube.delete({ kind: 'jointInferenceService', namespace: 'default', name: 'reborn' });
    expect((await send('delete', first)).status).toBe(200);
    const second = await named('reborn');
    expect((await send('add', second)).status).toBe(200);
    expect((await send('update', first)).status).toBe(202);
    const stored = JSON.parse(
      (await redis.client.hget('tasks:{edge0}:current', 'default/reborn'))!,
    ) as { uid: string };
    expect(stored.uid).toBe(second.metadata.uid);
  });

  it('retries the delete to the local controller of a node the service left until it has it', async () => {
    const created = await named('leaving');
    expect((await send('add', created)).status).toBe(200);
    const moved = await moveTo('leaving', 'edge1');
    lcStatus = 500;
    expect((await send('update', moved)).status).toBe(503);
    lcStatus = 200;
    expect((await send('update', moved)).status).toBe(200);
    expect(
      received.filter((r) => r.url.endsWith('/leaving')).map((r) => [r.method, r.operation]),
    ).toEqual([
      ['POST', 'insert'],
      ['DELETE', 'delete'],
      ['DELETE', 'delete'],
    ]);
    expect(await redis.client.smembers('tasks:{default/leaving}:nodes')).toEqual(['edge1']);
  });

  it('refuses an event about another kind with 400', async () => {
    const answer = await send('add', {
      apiVersion: 'edgeai.io/v1alpha1',
      kind: 'Model',
      metadata: { name: 'm', namespace: 'default', uid: 'u' },
    });
    expect(answer.status).toBe(400);
    expect(await answer.text()).toMatch(
      /downstream-sync handles edgeai.io\/v1alpha1 JointInferenceService, not edgeai.io\/v1alpha1 Model/,
    );
  });

  it('makes up for a lost update and a lost delete on its tick, and is a no-op otherwise', async () => {
    const tick = () => postEvent(fn.url, 'dev.knative.sources.ping', {});
    const sample = helmetDetectionSample();
    const created = await api.kube.create('jointInferenceService', 'default', {
      ...sample,
      metadata: { name: 'resynced', namespace: 'default' },
    });
    expect((await send('add', created)).status).toBe(200);
    const ref = { kind: 'jointInferenceService' as const, namespace: 'default', name: 'resynced' };
    // Changed while no event reached downstream-sync (the ApiServerSource was down, say).
    await api.kube.patch(ref, {
      spec: { edgeWorker: { hardExampleAlgorithm: { name: 'Threshold' } } },
    });
    received.length = 0;
    expect((await tick()).status).toBe(202);
    expect(received.map((r) => [r.method, r.operation, r.url])).toEqual([
      ['POST', 'update', '/lc/default/jointinferenceservices/resynced'],
    ]);
    received.length = 0;
    expect((await tick()).status).toBe(202);
    expect(received).toEqual([]);
    // Deleted, and its delete event lost.
    await api.kube.delete(ref);
    expect((await tick()).status).toBe(202);
    expect(received.map((r) => [r.method, r.operation, r.url])).toEqual([
      ['DELETE', 'delete', '/lc/default/jointinferenceservices/resynced'],
    ]);
    received.length = 0;
    expect((await tick()).status).toBe(202);
    expect(received).toEqual([]);
    expect(await redis.client.hexists('tasks:services', 'default/resynced')).toBe(0);
  });
});
