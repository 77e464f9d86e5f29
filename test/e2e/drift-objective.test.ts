/**
 * The accuracy objective and the drift reference on the real edge path over HTTP: outlier scores
 * answered when asked for by name (and only then), GET /skew in the report's schema, and shadow
 * calls that never hold an answer even when the cloud never answers them.
 */
import { readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workerQuality } from '../../shared/crds/index.js';
import { buildServer } from '../../shared/http/index.js';
import {
  WorkerCounters,
  createInferencePool,
  createMiner,
  createTaskAdapter,
  edgeInferDefinition,
  jointInfer,
} from '../../shared/inference/index.js';
import type { InferencePool, JointDeps } from '../../shared/inference/index.js';
import { createOutlierScorer, parseDriftReference } from '../../shared/inference/outlier.js';
import { qualityReport } from '../../shared/inference/quality-report.js';
import { createQualityWindow } from '../../shared/inference/quality-window.js';
import { createShadow } from '../../shared/inference/shadow.js';
import { loadMnist, pixels } from '../../shared/training/data.js';
import { perturbImages, perturbationSuite } from '../../shared/training/perturb.js';
import { capturedTelemetry, listen } from '../support/http.js';
import type { Listening } from '../support/http.js';

const models = new URL('../../models/', import.meta.url);

describe('the edge with an objective and a drift reference', () => {
  const { test } = loadMnist();
  let pool: InferencePool;
  let edge: Listening;
  let server: Server;
  let joint: JointDeps;
  const shadowOutcomes: string[] = [];
  /** Shadow calls park here: the cloud never answers them. */
  const parked: Array<() => void> = [];

  beforeAll(async () => {
    pool = await createInferencePool({
      model: new Uint8Array(readFileSync(new URL('edge.onnx', models))),
      threads: 1,
      maxBatch: 256,
      maxQueueRows: 4096,
      maxWaitMs: 0,
    });
    const reference = parseDriftReference(
      JSON.parse(readFileSync(new URL('edge.drift.json', models), 'utf8')),
    );
    const scorer = createOutlierScorer(reference, pool.signature.inputs[0]!);
    const quality = createQualityWindow({
      redis: undefined,
      service: 'test/drift',
      reporter: 'test',
      bucketSize: 50,
      buckets: 10,
      driftWindow: 100,
      refreshMs: 0,
      calibration: { objective: 0.01, z: 1, minLabelled: 20 },
      drift: { expectedShare: 0.05, raiseAt: 5, clearAt: 2, minInputs: 50 },
      log: capturedTelemetry('edge-infer').log,
    });
    joint = {
      edge: pool,
      task: createTaskAdapter({}, pool.signature),
      cloud: {
        infer: () => new Promise((resolve) => parked.push(() => resolve({}))),
        breakerState: () => 'closed',
      },
      // EdgeOnly: before the window has been read the miner decides, and nothing is hard.
      miner: createMiner('EdgeOnly', {}),
      settings: { miningMode: 'inference-then-mining', offload: 'sync', fallback: 'edge-result' },
      counters: new WorkerCounters(),
      quality,
      shadow: createShadow({
        rate: 1,
        maxInFlight: 2,
        onOutcome: (outcome) => shadowOutcomes.push(outcome),
      }),
      outliers: {
        score: (inputs, rows) => scorer.score(inputs['input']!, rows),
        cut: reference.quantiles.p95,
        sampleRate: 0,
        sampleRows: 16,
        random: () => 0.5,
      },
    };
    server = buildServer(
      edgeInferDefinition({
        model: { name: 'edge', version: '1' },
        joint,
        maxBatch: 1024,
        readiness: [],
        quality: () => qualityReport(quality, { objective: 1, shadowRate: 1, raiseAt: 5 }),
      }),
      {
        telemetry: capturedTelemetry('edge-infer'),
        bodyLimitBytes: 8 << 20,
        readinessTimeoutMs: 1000,
      },
    );
    edge = await listen(server);
  });

  afterAll(async () => {
    parked.forEach((release) => release());
    await joint.shadow?.idle();
    await edge?.close();
    await pool?.close();
  });

  const infer = async (x: Float32Array, rows: number, outputs?: string[]) => {
    const answer = await fetch(`${edge.url}/v2/models/edge/infer`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        inputs: [{ name: 'input', shape: [rows, pixels], datatype: 'FP32', data: Array.from(x) }],
        ...(outputs === undefined ? {} : { outputs: outputs.map((name) => ({ name })) }),
      }),
    });
    expect(answer.status).toBe(200);
    return (await answer.json()) as { outputs: Array<{ name: string; data: number[] }> };
  };

  it('lists outlier_score in the metadata and answers it only when asked for by name', async () => {
    const metadata = (await (await fetch(`${edge.url}/v2/models/edge`)).json()) as {
      outputs: Array<{ name: string }>;
    };
    expect(metadata.outputs.map((o) => o.name)).toContain('outlier_score');
    const rows = 64;
    const clean = test.x.slice(0, rows * pixels);
    const plain = await infer(clean, rows);
    expect(plain.outputs.map((o) => o.name)).not.toContain('outlier_score');
    const asked = await infer(clean, rows, ['outlier_score', 'tier']);
    expect(asked.outputs.map((o) => o.name)).toEqual(['outlier_score', 'tier']);
    const noise = perturbationSuite.find((p) => p.label === 'noise sigma 0.1')!;
    const noisy = await infer(perturbImages(clean, rows, 28, 28, noise, 1), rows, [
      'outlier_score',
    ]);
    const above = (body: typeof asked) =>
      body.outputs[0]!.data.filter((s) => s > joint.outliers!.cut).length / rows;
    expect(above(asked)).toBeLessThan(0.2);
    expect(above(noisy)).toBeGreaterThan(0.8);
  });

  it('never holds an answer for a shadow call, and skips shadow calls past the cap', async () => {
    for (let i = 0; i < 5; i += 1) {
      const samples = await jointInfer(
        joint,
        {
          input: {
            datatype: 'FP32',
            shape: [4, pixels],
            data: test.x.slice(i * 4 * pixels, (i + 1) * 4 * pixels),
          },
        },
        4,
      );
      expect(samples.every((s) => s.tier === 'edge')).toBe(true);
    }
    // Five answers while every shadow call hangs (until afterAll releases them): none waited
    // for one. The cap let two start, the rest were skipped.
    expect(parked.length).toBe(2);
    expect(shadowOutcomes.filter((o) => o === 'skipped').length).toBeGreaterThan(0);
  });

  it('counts for the drift test only the rows a sampled request scored', async () => {
    const window = createQualityWindow({
      redis: undefined,
      service: 'test/sampled',
      reporter: 'test',
      bucketSize: 50,
      buckets: 10,
      driftWindow: 100,
      refreshMs: 0,
      calibration: undefined,
      drift: { expectedShare: 0.05, raiseAt: 5, clearAt: 2, minInputs: 50 },
      log: capturedTelemetry('edge-infer').log,
    });
    const sampled: JointDeps = {
      ...joint,
      quality: window,
      outliers: { ...joint.outliers!, sampleRate: 1, sampleRows: 2 },
    };
    delete sampled.shadow;
    const rows = 8;
    await jointInfer(
      sampled,
      { input: { datatype: 'FP32', shape: [rows, pixels], data: test.x.slice(0, rows * pixels) } },
      rows,
    );
    await window.refresh();
    expect(window.state().driftInputs).toBe(2);
  });

  it('answers GET /skew with the figures it reports upstream, in the report schema', async () => {
    await joint.quality!.refresh();
    const answer = await fetch(`${edge.url}/skew`);
    expect(answer.status).toBe(200);
    const body = workerQuality.parse(await answer.json());
    expect(body).toMatchObject({ accuracyObjective: 1, shadowRate: 1, driftThreshold: 5 });
    expect(body.drifting).toBeTypeOf('boolean');
  });
});
