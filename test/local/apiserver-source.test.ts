/**
 * The local ApiServerSource from the repository's own knative/eventing/apiserversources.yaml,
 * against the development API server: what each source watches, and the events it sends.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SinkEvent } from '../../shared/events/index.js';
import { createKubeWatch, loadKubeConfig } from '../../shared/k8s/index.js';
import { parseApiServerSources, startApiServerSources } from '../../local/apiserver-source.js';
import { startApiServer } from '../support/apiserver.js';
import type { TestApiServer } from '../support/apiserver.js';
import { helmetDetectionSample } from '../support/samples.js';
import { signal } from '../support/signal.js';

const yaml = readFileSync(
  new URL('../../knative/eventing/apiserversources.yaml', import.meta.url),
  'utf8',
);

describe('local ApiServerSource', () => {
  let api: TestApiServer;
  const sent: Array<{ url: string; event: SinkEvent }> = [];
  const arrived = signal();
  let stop: () => void = () => {};
  beforeAll(async () => {
    api = await startApiServer();
    const sources = parseApiServerSources([yaml]);
    expect(sources.map((s) => s.metadata.name)).toEqual(['reconcile-tick', 'downstream-sync']);
    const started = await startApiServerSources({
      sources,
      kube: api.kube,
      watch: createKubeWatch(loadKubeConfig({ KUBECONFIG: api.kubeconfigFile })),
      serverUrl: api.url,
      brokerUrl: (namespace, name) => `http://broker/${namespace}/${name}`,
      sinkFor: (url) => (event) => {
        sent.push({ url, event });
        arrived.changed();
        return Promise.resolve();
      },
    });
    stop = () => started.stop();
  });
  afterAll(async () => {
    stop();
    await api.close();
  });

  it('sends a JointInferenceService change to the Broker once per source, marked for its function', async () => {
    const sample = helmetDetectionSample();
    await api.kube.create('jointInferenceService', 'default', {
      ...sample,
      metadata: { name: 'demo', namespace: 'default' },
    });
    await arrived.when(() => sent.length >= 2);
    const adds = sent.filter((s) => s.event.subject?.endsWith('/jointinferenceservices/demo'));
    expect(adds.map((s) => s.event.extensions?.['edgeaiwatch']).sort()).toEqual([
      'reconcile',
      'sync',
    ]);
    for (const { url, event } of adds) {
      expect(url).toBe('http://broker/edgeai-system/default');
      expect(event.type).toBe('dev.knative.apiserver.resource.add');
      expect(event.subject).toBe(
        '/apis/edgeai.io/v1alpha1/namespaces/default/jointinferenceservices/demo',
      );
      expect(event.data).toMatchObject({ metadata: { name: 'demo', namespace: 'default' } });
    }
    await api.kube.delete({ kind: 'jointInferenceService', namespace: 'default', name: 'demo' });
    await arrived.when(
      () =>
        sent.filter((s) => s.event.type === 'dev.knative.apiserver.resource.delete').length === 2,
    );
  });

  it('watches only the Knative Services the controller labels', async () => {
    const before = sent.length;
    const ksvc = (name: string, labels: Record<string, string>) => ({
      metadata: { name, namespace: 'default', labels },
      spec: { template: { spec: { containers: [{ image: 'x' }] } } },
    });
    await api.kube.create('knativeService', 'default', ksvc('someone-elses', {}));
    await api.kube.create(
      'knativeService',
      'default',
      ksvc('demo-edge', { 'app.kubernetes.io/managed-by': 'edgeai' }),
    );
    // A last labelled Service: its event comes after any the two before it caused (one watch,
    // its events sent in order), so once it is here nothing about those is still on its way.
    await api.kube.create(
      'knativeService',
      'default',
      ksvc('last-edge', { 'app.kubernetes.io/managed-by': 'edgeai' }),
    );
    await arrived.when(() => sent.some((s) => s.event.subject?.endsWith('/last-edge') === true));
    const services = sent.slice(before).map((s) => s.event.subject);
    expect(services).toEqual([
      '/apis/serving.knative.dev/v1/namespaces/default/services/demo-edge',
      '/apis/serving.knative.dev/v1/namespaces/default/services/last-edge',
    ]);
    expect(sent.at(-1)!.event.extensions).toEqual({ edgeaiwatch: 'reconcile' });
  });
});

describe('local ApiServerSource at start', () => {
  it('sends nothing for what exists when it starts, as Knative does; then every change', async () => {
    const api = await startApiServer();
    const sent: SinkEvent[] = [];
    try {
      const sample = helmetDetectionSample();
      const arrivedHere = signal();
      await api.kube.create('jointInferenceService', 'default', {
        ...sample,
        metadata: { name: 'before', namespace: 'default' },
      });
      const started = await startApiServerSources({
        sources: parseApiServerSources([yaml]),
        kube: api.kube,
        watch: createKubeWatch(loadKubeConfig({ KUBECONFIG: api.kubeconfigFile })),
        serverUrl: api.url,
        brokerUrl: (namespace, name) => `http://broker/${namespace}/${name}`,
        sinkFor: () => (event) => {
          sent.push(event);
          arrivedHere.changed();
          return Promise.resolve();
        },
      });
      try {
        await api.kube.patch(
          { kind: 'jointInferenceService', namespace: 'default', name: 'before' },
          { metadata: { labels: { touched: 'yes' } } },
        );
        await arrivedHere.when(() => sent.length >= 2);
        expect(sent.map((e) => e.type)).toEqual([
          'dev.knative.apiserver.resource.update',
          'dev.knative.apiserver.resource.update',
        ]);
      } finally {
        started.stop();
      }
    } finally {
      await api.close();
    }
  });

  it('refuses what it does not serve instead of ignoring it', () => {
    expect(() =>
      parseApiServerSources([
        yaml.replace('namespaceSelector: {}', 'namespaceSelector: { matchLabels: { a: b } }'),
      ]),
    ).toThrow();
  });
});
