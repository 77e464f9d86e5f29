/**
 * Federated learning on the embedded local stack, as a user runs it after `npm run local`: the
 * sample (knative/samples/federated-digits.yaml) applied with its Datasets written on this
 * machine; reconcile-tick deploys the aggregator and one trainer per edge node; rounds complete
 * and show in the status; a trainer SIGKILLed mid-round does not stop the job, which succeeds;
 * the Model ends up on the aggregator's model, whose bytes have the sha256 it names.
 */
import { execFile } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeObject } from '../../shared/k8s/index.js';
import { jobWorkers, killMidRound } from '../../local/demo-federated.js';
import { federatedSample, writeFederatedData } from '../../local/federated-files.js';
import { startLocalStack, waitFor } from '../../local/stack.js';
import type { LocalStack } from '../../local/stack.js';

const run = promisify(execFile);
const root = new URL('../../', import.meta.url);
const ns = 'default';
const rounds = 4;

interface History {
  round: number;
  participants: number;
  stragglers: string[];
  closedBy: string;
}

interface JobStatus {
  phase?: string;
  round?: number;
  history?: History[];
  globalModel?: { version: number; url: string; sha256: string };
  conditions?: Array<{ type: string; message?: string }>;
}

const jobRef = { kind: 'federatedLearningJob' as const, namespace: ns, name: 'digits' };
const statusOf = (o: KubeObject) => (o['status'] ?? {}) as JobStatus;

describe('federated learning on the local stack', () => {
  const outDir = join(fileURLToPath(root), `.test-build-${randomUUID()}`);
  // Before the test's own timeout: a slow run stops its processes instead of leaking them.
  const signal = AbortSignal.timeout(230_000);
  let stack: LocalStack | undefined;

  beforeAll(async () => {
    await run('npm', ['run', '-s', 'bundle', '--', `--outdir=${outDir}`], { cwd: root });
    stack = await startLocalStack({
      root,
      bundle: join(outDir, 'serve.mjs'),
      tickEveryMs: 2_000,
      signal,
    });
  }, 120_000);
  afterAll(async () => {
    await stack?.close();
    rmSync(outDir, { recursive: true, force: true });
  });

  /** The job's status.round every 200 ms until it ends; resolves with the values seen. */
  async function watchRounds(kube: LocalStack['kube']) {
    const seen: number[] = [];
    const final = await waitFor(
      'the job to end',
      async () => {
        const status = statusOf(await kube.get(jobRef));
        seen.push(status.round ?? 0);
        return status.phase === 'Succeeded' || status.phase === 'Failed' ? status : undefined;
      },
      { timeoutMs: 180_000, signal },
    );
    return { seen, final };
  }

  it('runs the sample: rounds complete, a trainer killed mid-round, Succeeded, the Model on the aggregator', async () => {
    const { kube } = stack!;
    const data = writeFederatedData(join(stack!.stateDir, 'fl'), {
      perClient: 300,
      evaluation: 300,
    });
    for (const object of federatedSample(root, data.dir)) {
      if (object.kind === 'Dataset') await kube.create('dataset', ns, object);
      if (object.kind === 'Model') await kube.create('model', ns, object);
      if (object.kind === 'FederatedLearningJob') {
        // A fixed number of rounds: the sample's 95% target could end it in round 1, before a
        // trainer can be killed mid-round.
        const spec = object['spec'] as Record<string, unknown>;
        await kube.create('federatedLearningJob', ns, {
          ...object,
          spec: { ...spec, stopCondition: { maxRounds: rounds } },
        });
      }
    }
    const watching = watchRounds(kube);
    const at = { stack: stack!, step: () => {}, wait: { signal } };
    const workers = jobWorkers(at);
    const [trainers, killed] = await Promise.all([workers, killMidRound(at, workers)]);
    expect(trainers.map((t) => t.node).sort()).toEqual(['edge0', 'edge1', 'edge2']);
    expect(killed.round).toBeGreaterThanOrEqual(2);

    const { seen, final } = await watching;
    expect(final.conditions?.find((c) => c.type === 'Failed')?.message ?? '').toBe('');
    expect(final.phase).toBe('Succeeded');
    // status.round grew to the last round, never back.
    expect(seen.at(-1)).toBe(rounds);
    expect(seen.some((r) => r < rounds)).toBe(true);
    expect(seen).toEqual([...seen].sort((a, b) => a - b));
    // Every round closed with at least the sample's quorum (2 of 3); the rest were stragglers.
    expect(final.history?.map((h) => h.round)).toEqual([1, 2, 3, 4]);
    for (const h of final.history ?? []) {
      expect(h.participants).toBeGreaterThanOrEqual(2);
      expect(h.participants + h.stragglers.length).toBe(3);
    }

    // The Model serves the job's last model, from the aggregator; its sha256 is that of the bytes.
    const model = final.globalModel!;
    expect(model.version).toBeGreaterThanOrEqual(rounds);
    const aggregatorUrl = 'http://digits-aggregator.default.svc.cluster.local';
    expect(model.url).toBe(`${aggregatorUrl}/v1/models/${model.version}`);
    const spec = await waitFor(
      'the Model to be updated',
      async () => {
        const current = (await kube.get({ kind: 'model', namespace: ns, name: 'digits-fl' }))[
          'spec'
        ] as { url: string; sha256?: string };
        return current.url === model.url ? current : undefined;
      },
      { timeoutMs: 60_000, signal },
    );
    expect(spec.sha256).toBe(model.sha256);
    const route = stack!.urlOf(ns, 'digits-aggregator')!;
    const served = await fetch(`${route}/v1/models/${model.version}`);
    expect(served.status).toBe(200);
    const bytes = new Uint8Array(await served.arrayBuffer());
    expect(createHash('sha256').update(bytes).digest('hex')).toBe(spec.sha256);

    // cleanPolicy All: the trainers went with the end of the job; the aggregator stays.
    const left = await waitFor(
      'the trainers to be deleted',
      async () => {
        const listed = await kube.list('knativeService', {
          namespace: ns,
          labelSelector: 'edgeai.io/federatedlearningjob=digits',
        });
        return listed.items.length === 1 ? listed.items : undefined;
      },
      { timeoutMs: 60_000, signal },
    );
    expect(left.map((s) => s.metadata.name)).toEqual(['digits-aggregator']);
  }, 240_000);
});
