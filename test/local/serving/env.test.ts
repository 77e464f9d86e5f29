/**
 * How the development serving builds a container's environment (as the kubelet does) and the
 * Knative status it writes, without processes or an API server.
 */
import { describe, expect, it } from 'vitest';
import {
  ContainerConfigError,
  parseServiceUrl,
  resolveContainerEnv,
  rewriteServiceUrls,
  secretData,
  serviceStatus,
} from '../../../local/serving/index.js';
import type { EnvSources, ServiceView } from '../../../local/serving/index.js';

function sources(
  secrets: Record<string, Record<string, string>>,
): EnvSources & { reads: string[] } {
  const reads: string[] = [];
  return {
    reads,
    namespace: 'demo',
    readSecret: async (name) => {
      reads.push(name);
      return Object.hasOwn(secrets, name) ? secrets[name] : undefined;
    },
    configMaps: { 'edgeai-redis': { url: 'redis://redis:6379' } },
    fields: { 'metadata.name': 'svc-00001-deployment', 'spec.nodeName': 'edge-1' },
  };
}

async function failure(work: Promise<unknown>): Promise<Error> {
  try {
    await work;
  } catch (err) {
    if (err instanceof Error) return err;
  }
  throw new Error('expected a failure');
}

describe('resolveContainerEnv', () => {
  it('applies envFrom first, then env in order, with $(VAR) expansion', async () => {
    const from = sources({
      bulk: { A: 'from-bulk', B: 'b', 'not a name': 'skipped' },
      creds: { password: 'pw' },
    });
    const env = await resolveContainerEnv(
      {
        envFrom: [
          { secretRef: { name: 'bulk' } },
          { prefix: 'CM_', configMapRef: { name: 'edgeai-redis' } },
          { secretRef: { name: 'absent', optional: true } },
        ],
        env: [
          { name: 'A', value: 'literal wins over envFrom' },
          { name: 'PASSWORD', valueFrom: { secretKeyRef: { name: 'creds', key: 'password' } } },
          { name: 'DSN', value: 'user:$(PASSWORD)@$(CM_url) $(UNDEFINED) $$(PASSWORD)' },
          { name: 'URL', valueFrom: { configMapKeyRef: { name: 'edgeai-redis', key: 'url' } } },
          { name: 'NODE', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } },
          { name: 'POD', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
          {
            name: 'MAYBE',
            valueFrom: { secretKeyRef: { name: 'creds', key: 'nothing', optional: true } },
          },
          { name: 'EMPTY' },
        ],
      },
      from,
    );
    expect(env).toEqual({
      A: 'literal wins over envFrom',
      B: 'b',
      CM_url: 'redis://redis:6379',
      PASSWORD: 'pw',
      DSN: 'user:pw@redis://redis:6379 $(UNDEFINED) $(PASSWORD)',
      URL: 'redis://redis:6379',
      NODE: 'edge-1',
      POD: 'svc-00001-deployment',
      EMPTY: '',
    });
    expect(from.reads.sort()).toEqual(['absent', 'bulk', 'creds']); // each Secret read once
  });

  it.each([
    [
      { env: [{ name: 'T', valueFrom: { secretKeyRef: { name: 'absent', key: 'k' } } }] },
      'secret "absent" not found',
    ],
    [
      { env: [{ name: 'T', valueFrom: { secretKeyRef: { name: 'creds', key: 'token' } } }] },
      "couldn't find key token in Secret demo/creds",
    ],
    [
      { env: [{ name: 'T', valueFrom: { configMapKeyRef: { name: 'other', key: 'k' } } }] },
      'configmap "other" not found',
    ],
    [
      { env: [{ name: 'T', valueFrom: { configMapKeyRef: { name: 'edgeai-redis', key: 'k' } } }] },
      "couldn't find key k in ConfigMap demo/edgeai-redis",
    ],
    [{ envFrom: [{ secretRef: { name: 'absent' } }] }, 'secret "absent" not found'],
    [
      { env: [{ name: 'T', valueFrom: { fieldRef: { fieldPath: 'metadata.uid' } } }] },
      'fieldPath "metadata.uid" is not served locally',
    ],
  ])('fails a required source that is missing with the kubelet message: %o', async (c, message) => {
    const err = await failure(resolveContainerEnv(c, sources({ creds: { password: 'pw' } })));
    expect(err).toBeInstanceOf(ContainerConfigError);
    expect(err.message).toContain(message);
  });

  it('decodes base64 data, stringData winning', () => {
    expect(
      secretData({
        data: { a: Buffer.from('one').toString('base64'), b: Buffer.from('x').toString('base64') },
        stringData: { b: 'two' },
      }),
    ).toEqual({ a: 'one', b: 'two' });
  });
});

describe('cluster-local Service URLs', () => {
  it('reads the Service a cluster-local http URL names', () => {
    expect(parseServiceUrl('http://helmet-cloud.edgeai.svc.cluster.local')).toEqual({
      name: 'helmet-cloud',
      namespace: 'edgeai',
      rest: '',
      qualified: true,
    });
    expect(parseServiceUrl('http://Cloud.NS.svc:8080/v1/infer?x=1#f')).toEqual({
      name: 'cloud',
      namespace: 'ns',
      rest: '/v1/infer?x=1#f',
      qualified: true,
    });
    expect(parseServiceUrl('http://cloud.ns/p')).toEqual({
      name: 'cloud',
      namespace: 'ns',
      rest: '/p',
      qualified: false,
    });
    for (const other of [
      'https://cloud.ns.svc.cluster.local',
      'http://cloud',
      'http://a.b.c',
      'http://cloud.ns.svc.cluster',
      'http://user@cloud.ns.svc',
      'http://cloud.ns.svc.cluster.local.example.com',
      'redis://redis.ns.svc.cluster.local:6379',
      ' http://cloud.ns.svc',
      'http://cloud.ns.svc.cluster.local:port',
    ])
      expect(parseServiceUrl(other), other).toBeUndefined();
  });

  it('replaces them with the route URL, keeping the path; a bare name.namespace only in a known namespace', () => {
    const asked: string[] = [];
    const env = rewriteServiceUrls(
      {
        CLOUD_URL: 'http://helmet-cloud.edgeai.svc.cluster.local',
        FQDN: 'http://helmet-cloud.edgeai.svc.cluster.local./x',
        WITH_PORT: 'http://upstream.edgeai.svc:80/v1/status?full=1',
        SHORT: 'http://helmet-cloud.edgeai/infer',
        ELSEWHERE: 'http://other.elsewhere.svc',
        EXTERNAL: 'http://example.com/x',
        REDIS_URL: 'redis://redis:6379',
        PLAIN: 'text',
      },
      {
        routeUrl: (namespace, name) => {
          asked.push(`${namespace}/${name}`);
          return `http://127.0.0.1:${1000 + asked.length}`;
        },
        isNamespace: (namespace) => namespace === 'edgeai',
      },
    );
    expect(env).toEqual({
      CLOUD_URL: 'http://127.0.0.1:1001',
      FQDN: 'http://127.0.0.1:1002/x',
      WITH_PORT: 'http://127.0.0.1:1003/v1/status?full=1',
      SHORT: 'http://127.0.0.1:1004/infer',
      ELSEWHERE: 'http://127.0.0.1:1005',
      EXTERNAL: 'http://example.com/x',
      REDIS_URL: 'redis://redis:6379',
      PLAIN: 'text',
    });
    expect(asked).toEqual([
      'edgeai/helmet-cloud',
      'edgeai/helmet-cloud',
      'edgeai/upstream',
      'edgeai/helmet-cloud',
      'elsewhere/other',
    ]);
  });
});

describe('serviceStatus', () => {
  const at = (s: number) => new Date(Date.UTC(2025, 0, 1, 0, 0, s));
  const ready = (status: ReturnType<typeof serviceStatus>) =>
    status.conditions.find((c) => c.type === 'Ready');

  it('is Unknown while the first revision starts, True once it is ready', () => {
    const starting: ServiceView = {
      name: 'svc',
      generation: 1,
      latest: { revision: 'svc-00001', phase: 'starting' },
      routed: undefined,
    };
    const first = serviceStatus(starting, [], at(0));
    expect(first).toMatchObject({
      observedGeneration: 1,
      latestCreatedRevisionName: 'svc-00001',
      latestReadyRevisionName: null,
      url: null,
      address: null,
    });
    expect(ready(first)).toMatchObject({ status: 'Unknown', reason: 'RevisionMissing' });
    const up = serviceStatus(
      {
        ...starting,
        latest: { revision: 'svc-00001', phase: 'ready' },
        routed: { revision: 'svc-00001', url: 'http://127.0.0.1:5000', up: true },
      },
      first.conditions,
      at(5),
    );
    expect(up).toMatchObject({
      latestReadyRevisionName: 'svc-00001',
      url: 'http://127.0.0.1:5000',
      address: { url: 'http://127.0.0.1:5000' },
      traffic: [{ revisionName: 'svc-00001', latestRevision: true, percent: 100 }],
    });
    expect(up.conditions.map((c) => [c.type, c.status, c.lastTransitionTime])).toEqual([
      ['ConfigurationsReady', 'True', '2025-01-01T00:00:05Z'],
      ['Ready', 'True', '2025-01-01T00:00:05Z'],
      ['RoutesReady', 'True', '2025-01-01T00:00:05Z'],
    ]);
    // A condition that does not flip keeps its transition time (RoutesReady, during a rollout).
    const rolling = serviceStatus(
      {
        ...starting,
        generation: 2,
        latest: { revision: 'svc-00002', phase: 'starting' },
        routed: { revision: 'svc-00001', url: 'http://127.0.0.1:5000', up: true },
      },
      up.conditions,
      at(9),
    );
    expect(rolling.conditions.map((c) => [c.type, c.status, c.lastTransitionTime])).toEqual([
      ['ConfigurationsReady', 'Unknown', '2025-01-01T00:00:09Z'],
      ['Ready', 'Unknown', '2025-01-01T00:00:09Z'],
      ['RoutesReady', 'True', '2025-01-01T00:00:05Z'],
    ]);
  });

  it('keeps routing to the old revision during a rollout, and says why a revision failed', () => {
    const routed = { revision: 'svc-00001', url: 'http://127.0.0.1:5000', up: true };
    const rolling = serviceStatus(
      { name: 'svc', generation: 2, latest: { revision: 'svc-00002', phase: 'starting' }, routed },
      [],
      at(0),
    );
    expect(rolling).toMatchObject({
      observedGeneration: 2,
      latestCreatedRevisionName: 'svc-00002',
      latestReadyRevisionName: 'svc-00001',
      url: routed.url,
    });
    expect(rolling.conditions.map((c) => c.status)).toEqual(['Unknown', 'Unknown', 'True']);
    const broken = serviceStatus(
      {
        name: 'svc',
        generation: 2,
        latest: { revision: 'svc-00002', phase: 'failed', failure: 'secret "x" not found' },
        routed,
      },
      [],
      at(0),
    );
    expect(ready(broken)).toMatchObject({
      status: 'False',
      reason: 'RevisionFailed',
      message: 'Revision "svc-00002" failed with message: secret "x" not found.',
    });
    expect(broken.url).toBe(routed.url);
  });
});
