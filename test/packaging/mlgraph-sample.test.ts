/**
 * knative/samples/mlgraph-ensemble.yaml: each node's environment passes its own config loader,
 * the joiner's clock reaches the joiner only (read by the development Broker, which applies
 * Knative's Trigger rules), and the nodes may reach Redis.
 */
import { readFileSync } from 'node:fs';
import { parseAllDocuments } from 'yaml';
import { describe, expect, it } from 'vitest';
import { createDevBroker, loadEventing } from '../../local/broker/index.js';
import { loadJoinerConfig, loadRouterConfig } from '../../shared/mlgraph/index.js';

const text = readFileSync(
  new URL('../../knative/samples/mlgraph-ensemble.yaml', import.meta.url),
  'utf8',
);
type Doc = {
  kind: string;
  metadata: { name: string };
  spec: Record<string, unknown>;
};
const docs = parseAllDocuments(text).map((d) => d.toJS() as Doc);
const service = (name: string) =>
  docs.find((d) => d.kind === 'Service' && d.metadata.name === name)!;

/** The container's literal env, as the node would see it, plus what Knative sets. */
function envOf(name: string): Record<string, string> {
  const spec = service(name).spec as {
    template: { spec: { containers: Array<{ env: Array<{ name: string; value?: string }> }> } };
  };
  const env: Record<string, string> = { K_SERVICE: name };
  for (const v of spec.template.spec.containers[0]!.env)
    if (v.value !== undefined) env[v.name] = v.value;
  return env;
}

describe('the ML graph sample', () => {
  it('gives each node settings its config loader takes', () => {
    expect(loadRouterConfig(envOf('digits-router'))).toMatchObject({
      node: 'digits-router',
      children: ['digits-edge', 'digits-cloud'],
      strategy: { kind: 'thompson' },
    });
    expect(loadJoinerConfig(envOf('digits-joiner'))).toMatchObject({
      node: 'digits-joiner',
      maxInputs: 2,
      sink: 'http://broker-ingress.knative-eventing.svc.cluster.local/edgeai-system/default',
    });
  });

  it("sends the joiner's ticks to the joiner and nothing else", async () => {
    const manifests = loadEventing([
      text,
      readFileSync(new URL('../../knative/eventing/broker.yaml', import.meta.url), 'utf8'),
    ]);
    expect(manifests.pingSources.map((p) => p.name)).toEqual(['digits-joiner']);
    const reached: string[] = [];
    const unmatched: string[] = [];
    const broker = createDevBroker({
      manifests,
      resolve: (ref) => {
        reached.push(ref.name);
        return undefined;
      },
      onEvent: (record) => {
        if (record.kind === 'unmatched') unmatched.push(record.event.attributes['id'] ?? '');
      },
    });
    broker.ingest('edgeai-system', 'default', {
      attributes: {
        specversion: '1.0',
        id: '1',
        type: 'dev.knative.sources.ping',
        source: '/apis/v1/namespaces/edgeai-system/pingsources/reconcile-tick',
      },
      data: Buffer.from('{}'),
    });
    broker.ingest('edgeai-system', 'default', {
      attributes: {
        specversion: '1.0',
        id: '2',
        type: 'dev.knative.sources.ping',
        source: '/apis/v1/namespaces/edgeai-system/pingsources/digits-joiner',
      },
      data: Buffer.from('{}'),
    });
    for (let i = 0; i < 200 && reached.length === 0; i += 1) {
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    await broker.close();
    expect([...new Set(reached)]).toEqual(['digits-joiner']);
    // reconcile-tick's tick (id 1) matched no Trigger of the sample.
    expect(unmatched).toEqual(['1']);
  });

  it('lets both nodes reach Redis, and nothing else', () => {
    const policy = docs.find((d) => d.kind === 'NetworkPolicy')!;
    expect(JSON.stringify(policy.spec)).toContain('"values":["digits-router","digits-joiner"]');
    for (const name of ['digits-router', 'digits-joiner']) {
      const spec = service(name).spec as { template: { spec: Record<string, unknown> } };
      expect(spec.template.spec['automountServiceAccountToken']).toBe(false);
    }
  });
});
