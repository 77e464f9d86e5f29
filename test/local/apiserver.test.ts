/**
 * The development API server through the real @kubernetes/client-node: the Kubernetes
 * behaviours the control plane depends on, one by one.
 */
import {
  ApiException,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  Watch,
  setHeaderOptions,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDevApiServer, kubeconfig, listenDevApiServer } from '../../local/apiserver/index.js';
import { httpsRequest } from '../support/apiserver.js';
import { signal } from '../support/signal.js';

const group = 'edgeai.io';
const version = 'v1alpha1';
const namespace = 'default';
const jis = { group, version, namespace, plural: 'jointinferenceservices' };
const ksvc = { group: 'serving.knative.dev', version: 'v1', namespace, plural: 'services' };
// The store's semantics on a kind with no schema (Knative's Service here): any body is kept.
const open = { ...ksvc, namespace: 'open' };
const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

interface Obj {
  metadata: {
    name: string;
    uid: string;
    resourceVersion: string;
    generation: number;
    labels?: Record<string, string>;
  };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
}

async function failure(
  work: Promise<unknown>,
): Promise<{ code: number; body: { reason: string; message: string; kind: string } }> {
  try {
    await work;
  } catch (err) {
    if (err instanceof ApiException) {
      return {
        code: err.code,
        body: JSON.parse(String(err.body)) as { reason: string; message: string; kind: string },
      };
    }
    throw err;
  }
  throw new Error('expected the call to fail');
}

describe('development API server via client-node', () => {
  let server: { url: string; close(): Promise<void> };
  let ca: string;
  let api: CustomObjectsApi;
  let core: CoreV1Api;
  let config: KubeConfig;

  beforeAll(async () => {
    const dev = createDevApiServer({ token: 'test-token' });
    server = await listenDevApiServer(dev);
    ca = dev.ca;
    config = new KubeConfig();
    config.loadFromString(kubeconfig({ server: server.url, token: 'test-token', ca }));
    api = config.makeApiClient(CustomObjectsApi);
    core = config.makeApiClient(CoreV1Api);
  });
  afterAll(() => server.close());

  const body = (name: string, spec: Record<string, unknown>, labels?: Record<string, string>) => ({
    apiVersion: 'serving.knative.dev/v1',
    kind: 'Service',
    metadata: { name, ...(labels ? { labels } : {}) },
    spec,
  });

  it('creates, reads, lists by label selector and refuses duplicates', async () => {
    const created = (await api.createNamespacedCustomObject({
      ...open,
      body: body('a', { x: 1 }, { tier: 'edge' }),
    })) as Obj;
    expect(created.metadata).toMatchObject({ name: 'a', generation: 1 });
    expect(created.metadata.uid).toMatch(/^[0-9a-f-]{36}$/);
    await api.createNamespacedCustomObject({
      ...open,
      body: body('b', { x: 2 }, { tier: 'cloud' }),
    });
    const read = (await api.getNamespacedCustomObject({ ...open, name: 'a' })) as Obj;
    expect(read.spec).toEqual({ x: 1 });
    const edge = (await api.listNamespacedCustomObject({
      ...open,
      labelSelector: 'tier=edge',
    })) as {
      items: Obj[];
    };
    expect(edge.items.map((o) => o.metadata.name)).toEqual(['a']);
    const notEdge = (await api.listNamespacedCustomObject({
      ...open,
      labelSelector: 'tier notin (edge)',
    })) as { items: Obj[] };
    expect(notEdge.items.map((o) => o.metadata.name)).toEqual(['b']);
    const dup = await failure(api.createNamespacedCustomObject({ ...open, body: body('a', {}) }));
    expect(dup.code).toBe(409);
    expect(dup.body).toMatchObject({ kind: 'Status', reason: 'AlreadyExists' });
  });

  it("stores a Secret's stringData as base64 data, as Kubernetes does", async () => {
    await core.createNamespacedSecret({
      namespace: 'ns',
      body: {
        metadata: { name: 's' },
        data: { kept: 'a2VwdA==', over: 'b2xk' },
        stringData: { over: 'new', token: 't0k' },
      },
    });
    const read = await core.readNamespacedSecret({ namespace: 'ns', name: 's' });
    expect(read.data).toEqual({ kept: 'a2VwdA==', over: 'bmV3', token: 'dDBr' });
    expect(read.stringData).toBeUndefined();
    await core.replaceNamespacedSecret({
      namespace: 'ns',
      name: 's',
      body: { metadata: { name: 's' }, stringData: { token: 'rotated' } },
    });
    const rotated = await core.readNamespacedSecret({ namespace: 'ns', name: 's' });
    expect(rotated.data).toEqual({ token: 'cm90YXRlZA==' });
    const refused = await failure(
      core.createNamespacedSecret({
        namespace: 'ns',
        body: { metadata: { name: 'n' }, stringData: { port: 6379 as unknown as string } },
      }),
    );
    expect(refused.code).toBe(400);
    const badKey = await failure(
      core.createNamespacedSecret({
        namespace: 'ns',
        body: { metadata: { name: 'k' }, stringData: { 'a b/c': 'x' } },
      }),
    );
    expect(badKey.code).toBe(422);
  });

  it('answers 404 and 422 with Status objects shaped like the real ones', async () => {
    const missing = await failure(api.getNamespacedCustomObject({ ...open, name: 'nope' }));
    expect(missing.code).toBe(404);
    expect(missing.body.reason).toBe('NotFound');
    expect(missing.body.message).toContain('"nope" not found');
    const invalid = await failure(
      api.createNamespacedCustomObject({ ...open, body: body('Bad_Name', {}) }),
    );
    expect(invalid.code).toBe(422);
    expect(invalid.body.reason).toBe('Invalid');
  });

  it('bumps generation on spec changes only, and refuses a stale resourceVersion', async () => {
    const created = (await api.createNamespacedCustomObject({
      ...open,
      body: body('gen', { threshold: 0.5 }),
    })) as Obj;
    const labelled = (await api.patchNamespacedCustomObject(
      { ...open, name: 'gen', body: { metadata: { labels: { a: 'b' } } } },
      merge,
    )) as Obj;
    expect(labelled.metadata.generation).toBe(1);
    expect(Number(labelled.metadata.resourceVersion)).toBeGreaterThan(
      Number(created.metadata.resourceVersion),
    );
    const changed = (await api.patchNamespacedCustomObject(
      { ...open, name: 'gen', body: { spec: { threshold: 0.7 } } },
      merge,
    )) as Obj;
    expect(changed.metadata.generation).toBe(2);
    const same = (await api.patchNamespacedCustomObject(
      { ...open, name: 'gen', body: { spec: { threshold: 0.7 } } },
      merge,
    )) as Obj;
    expect(same.metadata.resourceVersion).toBe(changed.metadata.resourceVersion);
    const stale = await failure(
      api.replaceNamespacedCustomObject({
        ...open,
        name: 'gen',
        body: {
          ...body('gen', { threshold: 0.9 }),
          metadata: { name: 'gen', resourceVersion: created.metadata.resourceVersion },
        },
      }),
    );
    expect(stale.code).toBe(409);
    expect(stale.body.reason).toBe('Conflict');
  });

  it('keeps status and spec apart (the status subresource)', async () => {
    await api.createNamespacedCustomObject({ ...open, body: body('st', { a: 1 }) });
    const viaMain = (await api.patchNamespacedCustomObject(
      { ...open, name: 'st', body: { status: { uploadCount: 5 } } },
      merge,
    )) as Obj;
    expect(viaMain.status).toBeUndefined();
    const viaStatus = (await api.patchNamespacedCustomObjectStatus(
      { ...open, name: 'st', body: { spec: { a: 2 }, status: { uploadCount: 5 } } },
      merge,
    )) as Obj;
    expect(viaStatus.status).toEqual({ uploadCount: 5 });
    expect(viaStatus.spec).toEqual({ a: 1 });
    expect(viaStatus.metadata.generation).toBe(1);
  });

  it('garbage-collects dependents when their owner is deleted', async () => {
    const owner = (await api.createNamespacedCustomObject({
      ...open,
      body: body('owner', {}),
    })) as Obj;
    const ref = {
      apiVersion: 'serving.knative.dev/v1',
      kind: 'Service',
      name: 'owner',
      uid: owner.metadata.uid,
      controller: true,
    };
    for (const name of ['owner-edge', 'owner-cloud']) {
      await api.createNamespacedCustomObject({
        ...ksvc,
        body: {
          apiVersion: 'serving.knative.dev/v1',
          kind: 'Service',
          metadata: { name, ownerReferences: [ref] },
          spec: {},
        },
      });
    }
    await api.createNamespacedCustomObject({
      ...ksvc,
      body: {
        apiVersion: 'serving.knative.dev/v1',
        kind: 'Service',
        metadata: { name: 'unowned' },
        spec: {},
      },
    });
    await api.deleteNamespacedCustomObject({ ...open, name: 'owner' });
    const left = (await api.listNamespacedCustomObject(ksvc)) as { items: Obj[] };
    expect(left.items.map((o) => o.metadata.name)).toEqual(['unowned']);
  });

  it('streams watch events, resumes from a resourceVersion, and serves core Nodes', async () => {
    const events: Array<[string, string]> = [];
    const seen = signal();
    const listed = (await api.listNamespacedCustomObject(open)) as {
      metadata: { resourceVersion: string };
    };
    const controller = await new Watch(config).watch(
      `/apis/serving.knative.dev/v1/namespaces/open/services`,
      { resourceVersion: listed.metadata.resourceVersion },
      (phase, obj: Obj) => {
        events.push([phase, obj.metadata.name]);
        seen.changed();
      },
      () => {},
    );
    await api.createNamespacedCustomObject({ ...open, body: body('w', {}) });
    await api.patchNamespacedCustomObject({ ...open, name: 'w', body: { spec: { b: 1 } } }, merge);
    await api.deleteNamespacedCustomObject({ ...open, name: 'w' });
    await seen.when(() => events.length >= 3);
    controller.abort();
    expect(events).toEqual([
      ['ADDED', 'w'],
      ['MODIFIED', 'w'],
      ['DELETED', 'w'],
    ]);
    await core.createNode({
      body: { metadata: { name: 'edge0', labels: { 'edgeai.io/edge': 'true' } } },
    });
    const nodes = await core.listNode({ labelSelector: 'edgeai.io/edge' });
    expect(nodes.items.map((n) => n.metadata?.name)).toEqual(['edge0']);
  });

  it('tells a selector watch when a label change moves an object out of it or into it', async () => {
    const events: Array<[string, string]> = [];
    const deleted: Obj[] = [];
    const seen = signal();
    const listed = (await api.listNamespacedCustomObject(open)) as {
      metadata: { resourceVersion: string };
    };
    const controller = await new Watch(config).watch(
      `/apis/serving.knative.dev/v1/namespaces/open/services`,
      { resourceVersion: listed.metadata.resourceVersion, labelSelector: 'team=a' },
      (phase, obj: Obj) => {
        events.push([phase, obj.metadata.name]);
        if (phase === 'DELETED') deleted.push(obj);
        seen.changed();
      },
      () => {},
    );
    const label = (team: string | null) =>
      api.patchNamespacedCustomObject(
        { ...open, name: 'moving', body: { metadata: { labels: { team } } } },
        merge,
      );
    await api.createNamespacedCustomObject({
      ...open,
      body: { ...body('moving', {}), metadata: { name: 'moving', labels: { team: 'a' } } },
    });
    await label('b');
    await api.patchNamespacedCustomObject(
      { ...open, name: 'moving', body: { spec: { x: 1 } } },
      merge,
    );
    await label('a');
    await api.patchNamespacedCustomObject(
      { ...open, name: 'moving', body: { spec: { x: 2 } } },
      merge,
    );
    await label(null);
    // A last object in the selection: the watch sends its events in order, so once its ADDED is
    // here, every event the changes above caused is too.
    await api.createNamespacedCustomObject({
      ...open,
      body: { ...body('marker', {}), metadata: { name: 'marker', labels: { team: 'a' } } },
    });
    await seen.when(() => events.some(([, name]) => name === 'marker'));
    controller.abort();
    // The spec change while labelled b is not this watch's business.
    expect(events).toEqual([
      ['ADDED', 'moving'],
      ['DELETED', 'moving'],
      ['ADDED', 'moving'],
      ['MODIFIED', 'moving'],
      ['DELETED', 'moving'],
      ['ADDED', 'marker'],
    ]);
    // Each DELETED carries the state the watch last matched, at the relabelling's version.
    const current = (await api.getNamespacedCustomObject({ ...open, name: 'moving' })) as Obj;
    expect(deleted.map((o) => o.metadata.labels?.['team'])).toEqual(['a', 'a']);
    expect(deleted[1]!.metadata.resourceVersion).toBe(current.metadata.resourceVersion);
  });

  it('refuses requests without the token, and a token sent to the wrong CA never leaves', async () => {
    const res = await httpsRequest(`${server.url}/api/v1/nodes`, ca);
    expect(res.status).toBe(401);
    expect(JSON.parse(res.body)).toMatchObject({ kind: 'Status', reason: 'Unauthorized' });
    // Not trusting the server's CA (anyone's own certificate on that port): the TLS handshake fails.
    await expect(httpsRequest(`${server.url}/api/v1/nodes`, undefined)).rejects.toThrow(
      /self|certificate/i,
    );
  });

  describe('custom resources against their CRD schema', () => {
    const sampleSpec = {
      edgeWorker: {
        model: { name: 'small-model' },
        hardExampleAlgorithm: { name: 'IBT', parameters: { threshold: 0.6 } },
      },
      cloudWorker: { model: { name: 'big-model' } },
    };
    const post = (body: unknown, query = '') =>
      httpsRequest(
        `${server.url}/apis/${group}/${version}/namespaces/${namespace}/jointinferenceservices${query}`,
        ca,
        {
          method: 'POST',
          headers: { authorization: 'Bearer test-token', 'content-type': 'application/json' },
          body: JSON.stringify(body),
        },
      );
    const jisBody = (name: string, spec: unknown) => ({
      apiVersion: `${group}/${version}`,
      kind: 'JointInferenceService',
      metadata: { name },
      spec,
    });

    it('refuses a wrong type with 422 Invalid naming the field, and stores nothing', async () => {
      const bad = {
        ...sampleSpec,
        edgeWorker: {
          ...sampleSpec.edgeWorker,
          hardExampleAlgorithm: { name: 'IBT', parameters: { threshold: 'high' } },
        },
      };
      const refused = await failure(
        api.createNamespacedCustomObject({ ...jis, body: jisBody('typed', bad) }),
      );
      expect(refused.code).toBe(422);
      expect(refused.body).toMatchObject({
        reason: 'Invalid',
        details: {
          name: 'typed',
          group,
          kind: 'JointInferenceService',
          causes: [
            {
              reason: 'FieldValueTypeInvalid',
              field: 'spec.edgeWorker.hardExampleAlgorithm.parameters.threshold',
            },
          ],
        },
      });
      expect(refused.body.message).toContain(
        'spec.edgeWorker.hardExampleAlgorithm.parameters.threshold in body must be of type number: "string"',
      );
      expect((await failure(api.getNamespacedCustomObject({ ...jis, name: 'typed' }))).code).toBe(
        404,
      );
    });

    it('validates patches too: a merge patch that breaks the schema is refused, the object kept', async () => {
      await api.createNamespacedCustomObject({ ...jis, body: jisBody('patched', sampleSpec) });
      const refused = await failure(
        api.patchNamespacedCustomObject(
          {
            ...jis,
            name: 'patched',
            body: { spec: { edgeWorker: { hardExampleAlgorithm: { name: 'Guess' } } } },
          },
          merge,
        ),
      );
      expect(refused.code).toBe(422);
      expect(refused.body.message).toContain('Unsupported value: "Guess"');
      const kept = (await api.getNamespacedCustomObject({ ...jis, name: 'patched' })) as Obj;
      expect(kept.metadata.generation).toBe(1);
    });

    it('prunes unknown fields with a Warning by default, and refuses them with fieldValidation=Strict', async () => {
      const extra = { ...sampleSpec, replicasWanted: 3 };
      const warned = await post(jisBody('pruned', extra));
      expect(warned.status).toBe(201);
      expect(warned.headers['warning']).toContain('unknown field \\"spec.replicasWanted\\"');
      expect((JSON.parse(warned.body) as Obj).spec).not.toHaveProperty('replicasWanted');
      const strict = await post(jisBody('strict', extra), '?fieldValidation=Strict');
      expect(strict.status).toBe(400);
      expect(JSON.parse(strict.body)).toMatchObject({
        reason: 'BadRequest',
        message: expect.stringContaining(
          'strict decoding error: unknown field "spec.replicasWanted"',
        ) as string,
      });
      const ignored = await post(jisBody('ignored', extra), '?fieldValidation=Ignore');
      expect(ignored.status).toBe(201);
      expect(ignored.headers['warning']).toBeUndefined();
    });
  });
});
