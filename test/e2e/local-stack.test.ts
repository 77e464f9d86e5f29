/**
 * `make demo`'s job, run by `make test`: the seed's JointInferenceService on the embedded local
 * stack (development API server, Serving supervisor, Broker, ApiServerSources, PingSources, the
 * control plane from knative/services/), with the image's bundle built as the image builds it.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runDemo } from '../../local/demo.js';

const run = promisify(execFile);
const root = new URL('../../', import.meta.url);

describe('the local stack', () => {
  const outDir = join(fileURLToPath(root), `.test-build-${randomUUID()}`);
  beforeAll(async () => {
    await run('npm', ['run', '-s', 'bundle', '--', `--outdir=${outDir}`], { cwd: root });
  }, 120_000);
  afterAll(() => rmSync(outDir, { recursive: true, force: true }));

  it('deploys the sample, answers with edge and cloud, reports, heals, updates and cascades', async () => {
    const lines: string[] = [];
    const result = await runDemo({
      root,
      bundle: join(outDir, 'serve.mjs'),
      images: 200,
      graphRequests: 300,
      say: (line) => lines.push(line),
      // Before the test's own timeout: a slow run stops its processes instead of leaking them.
      signal: AbortSignal.timeout(150_000),
    });
    const text = lines.join('\n');
    expect(text).toMatch(/function +reconcile-tick/);
    expect(text).toMatch(/helmet-detection-demo +True +Running +Running/);
    expect(text).toContain('reconcile-tick recreated it; ready again');
    expect(text).toContain('its worker Services went with it');
    expect(text).toMatch(/stream demo-camera-1 -> \S+ on \S+ \(policy [a-z-]+, HTTP 201\)/);
    // The seed's sample ran as written: IBT on the detection pair.
    expect(result.miner).toBe('IBT');
    expect(text).toContain('helmet-detection-demo.yaml, unchanged: miner IBT');
    // The cloud answered hard canvases (all of them unless one fell back under load), and the
    // edge's counters reached the status.
    expect(result.offloaded).toBeGreaterThan(0);
    expect(result.offloaded).toBeLessThanOrEqual(result.hard);
    expect(result.tiers.edge.images + result.tiers.cloud.images).toBe(200);
    expect(result.reported).toEqual({ inferenceNumber: 200, hardExampleNumber: result.hard });
    // The cloud detector is the better one, and joint inference gains on the edge alone.
    expect(result.map.cloud).toBeGreaterThan(result.map.edge);
    expect(result.map.joint).toBeGreaterThan(result.map.edge);
    // The spec update raised IBT's thresholdImg: the rolled-out edge finds more hard canvases.
    expect(text).toMatch(/update +IBT thresholdImg/);
    expect(result.updated.hard).toBeGreaterThan(result.hard);
    // The ML graph sample: deployed by reconcile-tick (its join runs in the executor: no joiner
    // Service), every prediction routed by the Thompson router and rewarded exactly once, the
    // same digits again with a cost on the cloud arm, and its Services deleted with it.
    expect(text).toContain('mlgraph-digits.yaml, unchanged');
    expect(text).toMatch(
      /Ready: 4 nodes, url http:\/\/127\.0\.0\.1:\d+; Services digits, digits-pick$/m,
    );
    expect(result.graph.requests).toBe(300);
    expect(result.graph.arms.reduce((n, a) => n + a.routed, 0)).toBe(300);
    expect(result.graph.arms.reduce((n, a) => n + a.rewarded, 0)).toBe(300);
    expect(text).toMatch(/graph costed +requests 241-300 \(rewarded as they go\)/);
    expect(result.graph.costed.lambda).toBe(0.1);
    for (const o of Object.values(result.graph.outcome))
      expect(o.net).toBeCloseTo(o.accuracy - 0.1 * o.offload, 9);
    expect(text).toContain('its executor and router Services went with it');
  }, 180_000);
});
