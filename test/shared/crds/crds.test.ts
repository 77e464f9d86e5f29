import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import {
  customResourceDefinitions,
  renderCustomResourceDefinitions,
} from '../../../shared/crds/generate.js';
import {
  jointInferenceServiceSpec,
  jointInferenceServiceStatus,
} from '../../../shared/crds/index.js';
import { parseInput } from '../../../shared/schema/index.js';
import { qualityReport } from '../../support/worker-quality.js';

const root = new URL('../../../', import.meta.url);

describe('CRDs', () => {
  it('match the committed YAML (run `npm run crds` after changing shared/crds/schemas.ts)', () => {
    for (const [file, text] of Object.entries(renderCustomResourceDefinitions())) {
      expect(readFileSync(new URL(`knative/crds/${file}`, root), 'utf8'), file).toBe(text);
    }
  });

  it('are structural: every schema node has a type (or keeps any value, or is int-or-string), and there are no unions', () => {
    const walk = (node: unknown, path: string): void => {
      if (typeof node !== 'object' || node === null) return;
      const schema = node as Record<string, unknown>;
      // Kubernetes lets a field without a type keep any value only when it says so; an
      // int-or-string has no type (its anyOf, optional, is left out here).
      if (schema['x-kubernetes-int-or-string'] === true)
        expect(schema['type'], `${path}: int-or-string`).toBeUndefined();
      else if (schema['x-kubernetes-preserve-unknown-fields'] !== true)
        expect(schema['type'], path).toBeTypeOf('string');
      // A structural schema has properties or additionalProperties, never both.
      if (schema['properties'] !== undefined)
        expect(schema['additionalProperties'], `${path}.additionalProperties`).toBeUndefined();
      for (const banned of ['anyOf', 'oneOf', 'allOf', '$ref', 'not'])
        expect(schema[banned], `${path}.${banned}`).toBeUndefined();
      for (const [name, child] of Object.entries(
        (schema['properties'] as Record<string, unknown> | undefined) ?? {},
      ))
        walk(child, `${path}.${name}`);
      if (schema['items'] !== undefined) walk(schema['items'], `${path}[]`);
      if (typeof schema['additionalProperties'] === 'object')
        walk(schema['additionalProperties'], `${path}{}`);
    };
    for (const [file, crd] of Object.entries(customResourceDefinitions())) {
      const version = (
        crd as { spec: { versions: Array<{ schema: { openAPIV3Schema: unknown } }> } }
      ).spec.versions[0]!;
      walk(version.schema.openAPIV3Schema, file);
    }
  });

  it('show drift and the estimated loss in kubectl get, Age last', () => {
    const crd = customResourceDefinitions()['jointinferenceservices.yaml'] as {
      spec: {
        versions: Array<{ additionalPrinterColumns: Array<{ name: string; jsonPath: string }> }>;
      };
    };
    const columns = crd.spec.versions[0]!.additionalPrinterColumns;
    expect(columns.map((c) => c.name)).toEqual([
      'Ready',
      'Edge',
      'Cloud',
      'Uploaded',
      'Drift',
      'EstLoss',
      'Age',
    ]);
    expect(columns.find((c) => c.name === 'Drift')?.jsonPath).toBe(
      '.status.conditions[?(@.type=="DataDrift")].status',
    );
    expect(columns.find((c) => c.name === 'EstLoss')).toMatchObject({
      type: 'number',
      jsonPath: '.status.quality.estimatedJointLoss',
    });
  });

  it('take what upstream-status writes: quality, shadowCount, shadowRatio', () => {
    const status = {
      shadowCount: 12,
      shadowRatio: 0.05,
      quality: { ...qualityReport, reportTime: '2026-11-22T10:00:00.000Z' },
    };
    expect(parseInput(jointInferenceServiceStatus, status, 'status')).toEqual(status);
    expect(() => parseInput(jointInferenceServiceStatus, { shadowRatio: 1.5 }, 'status')).toThrow(
      /status\.shadowRatio: Too big/,
    );
    expect(() =>
      parseInput(jointInferenceServiceStatus, { quality: { estimatedJointLoss: 101 } }, 'status'),
    ).toThrow(/status\.quality\.estimatedJointLoss: Too big/);
  });

  it('accept the seed sample unchanged', () => {
    const sample = parse(
      readFileSync(new URL('knative/samples/helmet-detection-demo.yaml', root), 'utf8'),
    ) as { spec: unknown };
    const spec = parseInput(jointInferenceServiceSpec, sample.spec, 'spec');
    expect(spec.edgeWorker.hardExampleAlgorithm.name).toBe('IBT');
    expect(spec.cloudWorker.model.name).toBe('big-model');
  });

  it.each([
    [
      { edgeWorker: { hardExampleAlgorithm: { name: 'Guess' } } },
      /spec\.edgeWorker\.hardExampleAlgorithm\.name: Invalid option/,
    ],
    [
      {
        edgeWorker: { hardExampleAlgorithm: { name: 'Threshold', parameters: { threshold: 1.5 } } },
      },
      /spec\.edgeWorker\.hardExampleAlgorithm\.parameters\.threshold: Too big/,
    ],
    [
      { edgeWorker: { model: { name: 'Big_Model' } } },
      /spec\.edgeWorker\.model\.name: must be a lowercase RFC 1123 subdomain/,
    ],
    [
      { edgeWorker: { offload: { fallback: 'retry' } } },
      /spec\.edgeWorker\.offload\.fallback: Invalid option/,
    ],
    [{ cloudWorker: { scale: { maxScale: 0 } } }, /spec\.cloudWorker\.scale\.maxScale: Too small/],
    [
      { edgeWorker: { offload: { accuracyObjective: 120 } } },
      /spec\.edgeWorker\.offload\.accuracyObjective: Too big/,
    ],
    [
      { edgeWorker: { offload: { shadowRate: -0.1 } } },
      /spec\.edgeWorker\.offload\.shadowRate: Too small/,
    ],
  ])('name the bad field: %o', (change, message) => {
    const base = {
      edgeWorker: { model: { name: 'small-model' }, hardExampleAlgorithm: { name: 'IBT' } },
      cloudWorker: { model: { name: 'big-model' } },
    };
    const spec = {
      edgeWorker: { ...base.edgeWorker, ...(change as { edgeWorker?: object }).edgeWorker },
      cloudWorker: { ...base.cloudWorker, ...(change as { cloudWorker?: object }).cloudWorker },
    };
    expect(() => parseInput(jointInferenceServiceSpec, spec, 'spec')).toThrow(message);
  });
});
