/**
 * The informer against the development API server through client-node: the first list, live
 * changes, and what happened while no watch was open (reported from a fresh list).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKubeWatch, inform, loadKubeConfig } from '../../../shared/k8s/index.js';
import type { KubeWatch, WatchEventType } from '../../../shared/k8s/index.js';
import { startApiServer } from '../../support/apiserver.js';
import type { TestApiServer } from '../../support/apiserver.js';
import { signal } from '../../support/signal.js';

const model = (name: string, url = 'file:///m.onnx') => ({
  metadata: { name, namespace: 'ns' },
  spec: { url, format: 'onnx' },
});

describe('informer', () => {
  let api: TestApiServer;
  let watch: KubeWatch;
  beforeAll(async () => {
    api = await startApiServer();
    watch = createKubeWatch(loadKubeConfig({ KUBECONFIG: api.kubeconfigFile }));
  });
  afterAll(() => api.close());

  it('reports the first list, then every change', async () => {
    await api.kube.create('model', 'ns', model('before'));
    const seen: Array<[WatchEventType, string]> = [];
    const changed = signal();
    const informer = inform({ kube: api.kube, watch }, 'model', { namespace: 'ns' }, (type, o) => {
      seen.push([type, o.metadata.name ?? '']);
      changed.changed();
    });
    await informer.synced;
    expect(seen).toEqual([['ADDED', 'before']]);
    await api.kube.create('model', 'ns', model('after'));
    await api.kube.patch(
      { kind: 'model', namespace: 'ns', name: 'before' },
      { spec: { url: 'file:///n.onnx' } },
    );
    await api.kube.delete({ kind: 'model', namespace: 'ns', name: 'after' });
    await changed.when(() => seen.length >= 4);
    expect(seen.slice(1)).toEqual([
      ['ADDED', 'after'],
      ['MODIFIED', 'before'],
      ['DELETED', 'after'],
    ]);
    informer.stop();
  });

  it('relists after its watch ends and reports the difference', async () => {
    let end: (() => void) | undefined;
    let opened = 0;
    const changed = signal();
    const closable: KubeWatch = {
      async watch(kind, options, onChange, done) {
        opened += 1;
        changed.changed();
        // The first watch swallows every change, as if the connection had dropped.
        const inner = await watch.watch(kind, options, opened === 1 ? () => {} : onChange, done);
        end = () => {
          inner.stop();
          done(undefined);
        };
        changed.changed();
        return inner;
      },
    };
    await api.kube.create('model', 'resync', {
      metadata: { name: 'a', namespace: 'resync' },
      spec: { url: 'file:///a', format: 'onnx' },
    });
    await api.kube.create('model', 'resync', {
      metadata: { name: 'b', namespace: 'resync' },
      spec: { url: 'file:///b', format: 'onnx' },
    });
    const seen: Array<[WatchEventType, string]> = [];
    const informer = inform(
      { kube: api.kube, watch: closable },
      'model',
      { namespace: 'resync' },
      (type, o) => {
        seen.push([type, o.metadata.name ?? '']);
        changed.changed();
      },
      { retryMs: 10 },
    );
    await informer.synced;
    await changed.when(() => end !== undefined);
    await api.kube.delete({ kind: 'model', namespace: 'resync', name: 'a' });
    await api.kube.patch(
      { kind: 'model', namespace: 'resync', name: 'b' },
      { spec: { url: 'file:///b2' } },
    );
    await api.kube.create('model', 'resync', {
      metadata: { name: 'c', namespace: 'resync' },
      spec: { url: 'file:///c', format: 'onnx' },
    });
    end!();
    await changed.when(() => seen.length >= 5);
    expect(seen).toEqual([
      ['ADDED', 'a'],
      ['ADDED', 'b'],
      ['MODIFIED', 'b'],
      ['ADDED', 'c'],
      ['DELETED', 'a'],
    ]);
    await changed.when(() => opened >= 2);
    informer.stop();
  });
});
