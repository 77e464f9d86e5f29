/** The client-node adapter against the development API server: results and typed errors. */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ConfigError,
  ConflictError,
  NotFoundError,
  UnavailableError,
  ValidationError,
} from '../../../shared/errors/index.js';
import { createKube, loadKubeConfig } from '../../../shared/k8s/index.js';
import type { Kube } from '../../../shared/k8s/index.js';
import { freePort } from '../../../local/index.js';
import {
  createDevApiServer,
  kubeconfig,
  listenDevApiServer,
} from '../../../local/apiserver/index.js';

const dir = mkdtempSync(join(tmpdir(), 'edgeai-kube-'));

let ca = '';

function kubeFor(server: string): Kube {
  const file = join(dir, `config-${Math.random()}`);
  writeFileSync(file, kubeconfig({ server, token: 't0ken', ca }));
  return createKube(loadKubeConfig({ KUBECONFIG: file }));
}

describe('shared/k8s adapter', () => {
  let server: { url: string; close(): Promise<void> };
  let kube: Kube;

  beforeAll(async () => {
    const dev = createDevApiServer({ token: 't0ken' });
    ca = dev.ca;
    server = await listenDevApiServer(dev);
    kube = kubeFor(server.url);
  });
  afterAll(() => server.close());

  it('creates, lists by selector, patches spec and status', async () => {
    const model = await kube.create('model', 'default', {
      metadata: { name: 'small-model', labels: { size: 'small' } },
      spec: { url: 'file:///models/edge.onnx', format: 'onnx' },
    });
    expect(model.apiVersion).toBe('edgeai.io/v1alpha1');
    expect(model.kind).toBe('Model');
    await kube.create('model', 'default', {
      metadata: { name: 'big-model', labels: { size: 'big' } },
      spec: { url: 'file:///models/cloud.onnx', format: 'onnx' },
    });
    const small = await kube.list('model', { namespace: 'default', labelSelector: 'size=small' });
    expect(small.items.map((m) => m.metadata.name)).toEqual(['small-model']);
    expect(Number(small.resourceVersion)).toBeGreaterThan(0);
    const all = await kube.list('model');
    expect(all.items).toHaveLength(2);
    const patched = await kube.patch(
      { kind: 'model', namespace: 'default', name: 'small-model' },
      { spec: { format: 'onnx', url: 'file:///m.onnx' } },
    );
    expect(patched.metadata.generation).toBe(2);
    const withStatus = await kube.patchStatus(
      { kind: 'model', namespace: 'default', name: 'small-model' },
      { status: { observedGeneration: 2 } },
    );
    expect(withStatus['status']).toEqual({ observedGeneration: 2 });
    await kube.create('node', undefined, { metadata: { name: 'edge0' } });
    expect((await kube.get({ kind: 'node', name: 'edge0' })).metadata.name).toBe('edge0');
  });

  it('maps failures to typed errors', async () => {
    await expect(
      kube.get({ kind: 'model', namespace: 'default', name: 'absent' }),
    ).rejects.toBeInstanceOf(NotFoundError);
    await expect(kube.get({ kind: 'node', name: 'absent' })).rejects.toThrow(
      /API server: nodes.core "absent" not found/,
    );
    await expect(
      kube.create('model', 'default', {
        metadata: { name: 'big-model' },
        spec: { url: 'file:///models/cloud.onnx', format: 'onnx' },
      }),
    ).rejects.toBeInstanceOf(ConflictError);
    await expect(
      kube.patch(
        { kind: 'model', namespace: 'default', name: 'big-model' },
        { metadata: { resourceVersion: '1' }, spec: { format: 'onnx' } },
      ),
    ).rejects.toBeInstanceOf(ConflictError);
    await expect(
      kube.create('model', 'default', { metadata: { name: 'Not_Valid' } }),
    ).rejects.toBeInstanceOf(ValidationError);
  });

  it('reports an unreachable API server as unavailable (retryable)', async () => {
    const down = kubeFor(`https://127.0.0.1:${await freePort()}`);
    await expect(
      down.list('jointInferenceService', { namespace: 'default' }),
    ).rejects.toBeInstanceOf(UnavailableError);
  });

  it("refuses a call it cannot make as the caller's bug, not as an unreachable server", async () => {
    const refused = [
      kube.patchStatus({ kind: 'secret', namespace: 'default', name: 'token' }, {}),
      kube.get({ kind: 'event', namespace: 'default', name: 'e1' }),
      kube.get({ kind: 'model', name: 'small-model' }),
    ];
    const errors = await Promise.all(
      refused.map((call) =>
        call.then(
          () => null,
          (e: unknown) => e,
        ),
      ),
    );
    expect(errors.map((e) => (e as Error).message)).toEqual([
      'Secrets have no status',
      'Events support create and list only',
      'Model needs a namespace',
    ]);
    for (const err of errors) expect(err).not.toBeInstanceOf(UnavailableError);
  });

  it('finds its configuration the standard way, and says what is missing', () => {
    expect(() => loadKubeConfig({})).toThrow(ConfigError);
    expect(() => loadKubeConfig({})).toThrow(/KUBECONFIG: not set, and not running in a cluster/);
    expect(() => loadKubeConfig({ KUBECONFIG: join(dir, 'missing') })).toThrow(
      /KUBECONFIG: cannot load/,
    );
  });
});
