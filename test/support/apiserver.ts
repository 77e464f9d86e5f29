/** A development API server on an ephemeral port and a client-node Kube that talks to it. */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { request } from 'node:https';
import { join } from 'node:path';
import { createKube, loadKubeConfig, meteredKube } from '../../shared/k8s/index.js';
import type { Kube, KindName, Verb } from '../../shared/k8s/index.js';
import { createDevApiServer, kubeconfig, listenDevApiServer } from '../../local/apiserver/index.js';
import type { Store } from '../../local/apiserver/index.js';

export interface TestApiServer {
  url: string;
  store: Store;
  /** A client-node Kube whose calls are counted in `calls` ("verb kind" -> count). */
  kube: Kube;
  kubeconfigFile: string;
  /** PEM of the server's CA (clients other than client-node trust it explicitly). */
  ca: string;
  calls: Map<string, number>;
  /** Writes (create, patch, patchStatus, delete) counted since the last reset. */
  writes(): number;
  resetCalls(): void;
  close(): Promise<void>;
}

export async function startApiServer(): Promise<TestApiServer> {
  const token = randomUUID();
  const dev = createDevApiServer({ token });
  const listening = await listenDevApiServer(dev);
  const file = join(mkdtempSync(join(tmpdir(), 'edgeai-api-')), 'kubeconfig');
  writeFileSync(file, kubeconfig({ server: listening.url, token, ca: dev.ca }));
  const calls = new Map<string, number>();
  const kube = meteredKube(createKube(loadKubeConfig({ KUBECONFIG: file })), (verb, kind) => {
    const key = `${verb} ${kind}`;
    calls.set(key, (calls.get(key) ?? 0) + 1);
  });
  const writeVerbs: readonly Verb[] = ['create', 'patch', 'patchStatus', 'delete'];
  return {
    url: listening.url,
    store: dev.store,
    kube,
    kubeconfigFile: file,
    ca: dev.ca,
    calls,
    writes: () =>
      [...calls].reduce(
        (sum, [key, n]) => (writeVerbs.includes(key.split(' ')[0] as Verb) ? sum + n : sum),
        0,
      ),
    resetCalls: () => calls.clear(),
    close: () => listening.close(),
  };
}

export type { KindName };

/** A request over HTTPS trusting `ca` (none: the system's CAs), to see what client-node hides. */
export function httpsRequest(
  url: string,
  ca: string | undefined,
  options: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  return new Promise((resolve, reject) => {
    const { method = 'GET', headers = {}, body } = options;
    const req = request(url, { ca, headers, method }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: Buffer.concat(chunks).toString('utf8'),
        }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}
