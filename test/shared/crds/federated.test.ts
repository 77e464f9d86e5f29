import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { customResourceDefinitions } from '../../../shared/crds/generate.js';
import {
  datasetSpec,
  federatedLearningJobSpec,
  federatedLearningJobStatus,
  maxRounds,
  modelSpec,
  requiredParticipants,
  trainingParameters,
} from '../../../shared/crds/index.js';
import { parseInput } from '../../../shared/schema/index.js';

const root = new URL('../../../', import.meta.url);

/**
 * Sedna's surface-defect-detection FederatedLearningJob as Sedna ships it
 * (kubeedge/sedna build/crd-samples/sedna/federatedlearningjob_v1alpha2.yaml), apiVersion ours.
 */
const sednaJob = `
apiVersion: edgeai.io/v1alpha1
kind: FederatedLearningJob
metadata:
  name: surface-defect-detection
spec:
  transmitter: # option
    ws: { } # option, by default
  aggregationWorker:
    model:
      name: "surface-defect-detection-model"
    template:
      spec:
        nodeName: "sedna-control-plane"
        containers:
          - image: kubeedge/sedna-example-federated-learning-surface-defect-detection-aggregation:v0.4.0
            name:  agg-worker
            imagePullPolicy: IfNotPresent
            env: # user defined environments
              - name: "exit_round"
                value: "10"
            resources:  # user defined resources
              limits:
                memory: 2Gi
  trainingWorkers:
    - dataset:
        name: "edge1-surface-defect-detection-dataset"
      template:
        spec:
          nodeName: "edge-node"
          containers:
            - image: kubeedge/sedna-example-federated-learning-surface-defect-detection-train:v0.4.0
              name:  train-worker
              imagePullPolicy: IfNotPresent
              args: [ "-i", "1" ]
              env:  # user defined environments
                - name: "batch_size"
                  value: "32"
                - name: "learning_rate"
                  value: "0.001"
                - name: "epochs"
                  value: "1"
              resources:  # user defined resources
                limits:
                  memory: 2Gi
    - dataset:
          name: "edge2-surface-defect-detection-dataset"
      template:
        spec:
          nodeName: "edge-node"
          containers:
            - image: kubeedge/sedna-example-federated-learning-surface-defect-detection-train:v0.4.0
              name:  train-worker
              imagePullPolicy: IfNotPresent
              args: [ "-i", "2" ]
              env:  # user defined environments
                - name: "batch_size"
                  value: "32"
                - name: "learning_rate"
                  value: "0.001"
                - name: "epochs"
                  value: "1"
              resources:  # user defined resources
                limits:
                  memory: 2Gi
`;

/** Sedna's Dataset sample (build/crd-samples/sedna/dataset_v1alpha1.yaml), apiVersion ours. */
const sednaDataset = `
apiVersion: edgeai.io/v1alpha1
kind: Dataset
metadata:
  name: "dataset-demo0"
spec:
  url: "/code/data/train.txt"
  format: "txt"
  nodeName: "edge0"
`;

type Json = Record<string, unknown>;
const sednaSpec = () => (parse(sednaJob) as { spec: Json }).spec;
const parseJob = (spec: unknown) => parseInput(federatedLearningJobSpec, spec, 'spec');

/** A small valid job: two trainers, the given changes on top. */
function job(change: Json = {}): Json {
  const trainer = (dataset: string) => ({ dataset: { name: dataset }, template: {} });
  return {
    aggregationWorker: { model: { name: 'digits-fl' }, template: {} },
    trainingWorkers: [trainer('a'), trainer('b')],
    ...change,
  };
}

/** A trainer whose first container sets this env. */
const envTrainer = (dataset: string, env: Record<string, string>) => ({
  dataset: { name: dataset },
  template: {
    spec: {
      containers: [
        { name: 't', env: Object.entries(env).map(([name, value]) => ({ name, value })) },
      ],
    },
  },
});

describe('FederatedLearningJob spec', () => {
  it("accepts Sedna's example unchanged, filling in the defaults", () => {
    const spec = sednaSpec();
    const parsed = parseJob(spec);
    const policy = { restartPolicy: 'OnFailure', backoffLimit: 6 };
    const workers = spec['trainingWorkers'] as Json[];
    expect(parsed).toEqual({
      ...spec,
      aggregationWorker: { ...(spec['aggregationWorker'] as Json), ...policy },
      trainingWorkers: workers.map((w) => ({ ...w, ...policy })),
      roundPolicy: {
        minParticipants: '100%',
        roundTimeoutSeconds: 600,
        acceptFailures: true,
        fractionFit: 1,
        minFitClients: 1,
      },
      aggregation: { algorithm: 'FedAvg' },
      stopCondition: { patience: 1 },
      cleanPolicy: 'All',
      modelUpdate: 'OnCompletion',
    });
    // The templates are kept whole: image, args, resources pass through.
    expect(parsed.trainingWorkers[1]?.template).toEqual(workers[1]?.['template']);
  });

  it('takes the typed additions', () => {
    const parsed = parseJob(
      job({
        roundPolicy: { minParticipants: '60%', roundTimeoutSeconds: 30, acceptFailures: false },
        stopCondition: { maxRounds: 5, targetAccuracy: 0.9, minLossImprovement: 0.01, patience: 2 },
        training: { epochs: 2, batchSize: 0, learningRate: 0.1, seed: 7 },
        evaluationDataset: { name: 'held-out' },
        aggregation: {},
        cleanPolicy: 'None',
        modelUpdate: 'OnImprovement',
      }),
    );
    expect(parsed.roundPolicy).toEqual({
      fractionFit: 1,
      minFitClients: 1,
      minParticipants: '60%',
      roundTimeoutSeconds: 30,
      acceptFailures: false,
    });
    expect(parsed.aggregation).toEqual({ algorithm: 'FedAvg' });
    expect(parsed.stopCondition.patience).toBe(2);
    expect(parseJob(job({ roundPolicy: { minParticipants: 2 } })).roundPolicy.minParticipants).toBe(
      2,
    );
  });

  it.each<[string, Json, RegExp]>([
    [
      'no trainer',
      { trainingWorkers: [] },
      /^spec\.trainingWorkers: at least one training worker is required$/,
    ],
    [
      'a dataset twice',
      {
        trainingWorkers: [
          { dataset: { name: 'a' }, template: {} },
          { dataset: { name: 'b' }, template: {} },
          { dataset: { name: 'a' }, template: {} },
        ],
      },
      /^spec\.trainingWorkers\[2\]\.dataset\.name: dataset a is already used by trainingWorkers\[0\]$/,
    ],
    [
      'more participants than trainers',
      { roundPolicy: { minParticipants: 3 } },
      /^spec\.roundPolicy\.minParticipants: 3 participants asked for, but the job has 2 training workers$/,
    ],
    [
      'a percentage above 100',
      { roundPolicy: { minParticipants: '150%' } },
      /^spec\.roundPolicy\.minParticipants: must be a count >= 1 or a percentage 1%-100%$/,
    ],
    [
      'no participant',
      { roundPolicy: { minParticipants: 0 } },
      /^spec\.roundPolicy\.minParticipants: must be a count >= 1 or a percentage 1%-100%$/,
    ],
    [
      'a fraction of a participant',
      { roundPolicy: { minParticipants: 1.5 } },
      /^spec\.roundPolicy\.minParticipants: must be a count >= 1 or a percentage 1%-100%$/,
    ],
    [
      'a round without time',
      { roundPolicy: { roundTimeoutSeconds: 0 } },
      /^spec\.roundPolicy\.roundTimeoutSeconds: Too small/,
    ],
    [
      'an unknown restart policy',
      { trainingWorkers: [{ dataset: { name: 'a' }, template: {}, restartPolicy: 'Sometimes' }] },
      /^spec\.trainingWorkers\[0\]\.restartPolicy: Invalid option/,
    ],
    [
      'a negative backoff',
      { aggregationWorker: { model: { name: 'm' }, template: {}, backoffLimit: -1 } },
      /^spec\.aggregationWorker\.backoffLimit: Too small/,
    ],
    [
      'an accuracy above 1',
      { stopCondition: { targetAccuracy: 1.5 } },
      /^spec\.stopCondition\.targetAccuracy: Too big/,
    ],
    ['no round', { stopCondition: { maxRounds: 0 } }, /^spec\.stopCondition\.maxRounds: Too small/],
    [
      'a negative improvement',
      { stopCondition: { minLossImprovement: -0.1 } },
      /^spec\.stopCondition\.minLossImprovement: Too small/,
    ],
    [
      'no patience',
      { stopCondition: { patience: 0 } },
      /^spec\.stopCondition\.patience: Too small/,
    ],
    [
      'a zero learning rate',
      { training: { learningRate: 0 } },
      /^spec\.training\.learningRate: Too small/,
    ],
    [
      'a fractional batch',
      { training: { batchSize: 1.5 } },
      /^spec\.training\.batchSize: Invalid input: expected int/,
    ],
    ['no epoch', { training: { epochs: 0 } }, /^spec\.training\.epochs: Too small/],
    [
      'an unknown algorithm',
      { aggregation: { algorithm: 'FedMedian' } },
      /^spec\.aggregation\.algorithm: Invalid option: expected one of "FedAvg"\|"FedProx"/,
    ],
    [
      'privacy around Krum',
      { aggregation: { algorithm: 'Krum', privacy: { noiseMultiplier: 1, clippingNorm: 1 } } },
      /^spec\.aggregation\.privacy: privacy needs an averaging algorithm .*, not Krum$/,
    ],
    [
      'privacy around FedBuff',
      { aggregation: { algorithm: 'FedBuff', privacy: { noiseMultiplier: 1, clippingNorm: 1 } } },
      /^spec\.aggregation\.privacy: privacy needs an averaging algorithm .*, not FedBuff$/,
    ],
    [
      'an empty FedBuff buffer',
      { aggregation: { algorithm: 'FedBuff', bufferSize: 0 } },
      /^spec\.aggregation\.bufferSize: Too small/,
    ],
    [
      'more trainers per round than the job has',
      { roundPolicy: { minFitClients: 9 } },
      /^spec\.roundPolicy\.minFitClients: 9 trainers per round asked for, but the job has/,
    ],
    [
      'a fraction over 1',
      { roundPolicy: { fractionFit: 1.5 } },
      /^spec\.roundPolicy\.fractionFit: Too big/,
    ],
    ['an unknown clean policy', { cleanPolicy: 'Some' }, /^spec\.cleanPolicy: Invalid option/],
    ['an unknown model update', { modelUpdate: 'Always' }, /^spec\.modelUpdate: Invalid option/],
    [
      'a bad node name',
      {
        trainingWorkers: [{ dataset: { name: 'a' }, template: { spec: { nodeName: 'Edge_1' } } }],
      },
      /^spec\.trainingWorkers\[0\]\.template\.spec\.nodeName: must be a lowercase RFC 1123 subdomain$/,
    ],
    [
      'a trainer without a dataset',
      { trainingWorkers: [{ template: {} }] },
      /^spec\.trainingWorkers\[0\]\.dataset: Invalid input: expected object/,
    ],
    [
      'an aggregator without a model',
      { aggregationWorker: { template: {} } },
      /^spec\.aggregationWorker\.model: Invalid input: expected object/,
    ],
    [
      "a Sedna env that doesn't read",
      { trainingWorkers: [envTrainer('a', { epochs: '2', batch_size: 'many' })] },
      /^spec\.trainingWorkers\[0\]\.template\.spec\.containers\[0\]\.env\[1\]\.value: batch_size must be a whole number >= 0, not "many"$/,
    ],
    [
      'a zero learning rate in the env',
      { trainingWorkers: [envTrainer('a', { learning_rate: '0' })] },
      /^spec\.trainingWorkers\[0\]\.template\.spec\.containers\[0\]\.env\[0\]\.value: learning_rate must be a number > 0, not "0"$/,
    ],
    [
      'no round in the aggregator env',
      {
        aggregationWorker: {
          model: { name: 'm' },
          template: { spec: { containers: [{ env: [{ name: 'exit_round', value: '0' }] }] } },
        },
      },
      /^spec\.aggregationWorker\.template\.spec\.containers\[0\]\.env\[0\]\.value: exit_round must be a whole number >= 1, not "0"$/,
    ],
  ])('refuses %s, naming the field', (_what, change, message) => {
    expect(() => parseJob(job(change))).toThrow(message);
  });

  it('leaves env it does not read alone, and env without a value', () => {
    const trainer = {
      dataset: { name: 'a' },
      template: {
        spec: {
          containers: [
            {
              env: [
                { name: 'mode', value: 'anything' },
                { name: 'epochs', valueFrom: { configMapKeyRef: { name: 'c', key: 'k' } } },
              ],
            },
          ],
        },
      },
    };
    expect(() => parseJob(job({ trainingWorkers: [trainer] }))).not.toThrow();
  });
});

describe('trainingParameters', () => {
  it("reads Sedna's env when the spec has no training", () => {
    expect(trainingParameters(parseJob(sednaSpec()))).toEqual({
      epochs: 1,
      batchSize: 32,
      learningRate: 0.001,
      seed: 1,
    });
  });

  it('prefers the typed field to the env, field by field, and defaults the rest', () => {
    const spec = parseJob(
      job({
        trainingWorkers: [
          envTrainer('a', { epochs: '3', batch_size: '16', learning_rate: '1e-2' }),
        ],
        training: { batchSize: 64 },
      }),
    );
    expect(trainingParameters(spec)).toEqual({
      epochs: 3,
      batchSize: 64,
      learningRate: 0.01,
      seed: 1,
    });
    expect(trainingParameters(parseJob(job({ training: { seed: 9, epochs: 2 } })))).toEqual({
      epochs: 2,
      batchSize: 10,
      learningRate: 0.05,
      seed: 9,
    });
  });

  it("reads each trainer's own env", () => {
    const spec = parseJob(
      job({
        trainingWorkers: [envTrainer('a', { epochs: '2' }), envTrainer('b', { epochs: '5' })],
      }),
    );
    expect(trainingParameters(spec, 0).epochs).toBe(2);
    expect(trainingParameters(spec, 1).epochs).toBe(5);
    expect(trainingParameters(spec, 7).epochs).toBe(1);
  });

  it('takes batch size 0 (full batch) from the field and the env', () => {
    expect(trainingParameters(parseJob(job({ training: { batchSize: 0 } }))).batchSize).toBe(0);
    const spec = parseJob(job({ trainingWorkers: [envTrainer('a', { batch_size: '0' })] }));
    expect(trainingParameters(spec).batchSize).toBe(0);
  });
});

describe('maxRounds', () => {
  const withExitRound = (value: string, stopCondition: Json = {}) =>
    parseJob(
      job({
        aggregationWorker: {
          model: { name: 'm' },
          template: { spec: { containers: [{ env: [{ name: 'exit_round', value }] }] } },
        },
        stopCondition,
      }),
    );

  it("is stopCondition.maxRounds, else the aggregator's exit_round, else 10", () => {
    expect(maxRounds(withExitRound('3', { maxRounds: 4 }))).toBe(4);
    expect(maxRounds(withExitRound('3'))).toBe(3);
    expect(maxRounds(parseJob(job()))).toBe(10);
  });
});

describe('requiredParticipants', () => {
  it.each<[number | string, number, number]>([
    ['100%', 3, 3],
    ['100%', 2, 2],
    ['60%', 5, 3],
    ['50%', 3, 2],
    ['1%', 3, 1],
    ['100%', 0, 1],
    [2, 3, 2],
    [3, 2, 3],
  ])('%s of %i eligible trainers is %i', (min, eligible, expected) => {
    expect(requiredParticipants(min, eligible)).toBe(expected);
  });
});

describe('FederatedLearningJob status', () => {
  const status = {
    phase: 'Running',
    conditions: [
      { type: 'Created', status: 'True' },
      { type: 'Running', status: 'True', reason: 'RoundOpen' },
    ],
    startTime: '2026-11-22T10:00:00Z',
    observedGeneration: 1,
    round: 3,
    accuracy: 0.91,
    loss: 0.3,
    activeWorkers: 4,
    workers: {
      'digits-trainer-0': {
        dataset: 'digits-edge0',
        node: 'edge0',
        state: 'Running',
        lastRound: 3,
        updatesAccepted: 3,
        updatesRefused: 0,
        failures: 1,
        restarts: 1,
        exitCode: 137,
        reportTime: '2026-11-22T10:01:00Z',
        handledReport: '2026-11-22T10:01:00Z',
        outcome: 'Recovered',
      },
    },
    history: [
      {
        round: 3,
        participants: 2,
        stragglers: ['digits-trainer-2'],
        loss: 0.3,
        accuracy: 0.91,
        durationMs: 1200,
        closedBy: 'deadline',
      },
    ],
    globalModel: {
      version: 3,
      url: 'file:///var/lib/edgeai/fl/digits-3.onnx',
      sha256: 'a'.repeat(64),
    },
  };

  it('takes what the controller writes', () => {
    expect(parseInput(federatedLearningJobStatus, status, 'status')).toEqual(status);
  });

  it.each<[string, Json, RegExp]>([
    [
      'a condition per round',
      { conditions: [{ type: 'Round3', status: 'True' }] },
      /^status\.conditions\[0\]\.type: Invalid option/,
    ],
    [
      'a condition twice',
      {
        conditions: [
          { type: 'Running', status: 'True' },
          { type: 'Running', status: 'False' },
        ],
      },
      /^status\.conditions: one condition per type$/,
    ],
    ['an unknown phase', { phase: 'Paused' }, /^status\.phase: Invalid option/],
    [
      'a longer history',
      {
        history: Array.from({ length: 21 }, (_, i) => ({
          round: i + 1,
          participants: 1,
          stragglers: [],
          durationMs: 1,
          closedBy: 'all',
        })),
      },
      /^status\.history: Too big/,
    ],
    [
      'an unknown closer',
      {
        history: [
          { round: 1, participants: 1, stragglers: [], durationMs: 1, closedBy: 'timeout' },
        ],
      },
      /^status\.history\[0\]\.closedBy: Invalid option/,
    ],
    [
      'a digest that is not one',
      { globalModel: { version: 1, url: 'file:///m.onnx', sha256: 'abc' } },
      /^status\.globalModel\.sha256: must be 64 lowercase hex digits$/,
    ],
  ])('refuses %s, naming the field', (_what, change, message) => {
    expect(() => parseInput(federatedLearningJobStatus, change, 'status')).toThrow(message);
  });
});

describe('Dataset spec', () => {
  it("accepts Sedna's sample unchanged", () => {
    const spec = (parse(sednaDataset) as { spec: Json }).spec;
    expect(parseInput(datasetSpec, spec, 'spec')).toEqual(spec);
  });

  it.each<[string, Json, RegExp]>([
    ['an empty url', { url: '', format: 'csv', nodeName: 'edge0' }, /^spec\.url: Too small/],
    [
      'a url of 4097 characters',
      { url: 'x'.repeat(4097), format: 'csv', nodeName: 'edge0' },
      /^spec\.url: Too big/,
    ],
    [
      'no format',
      { url: '/d.csv', nodeName: 'edge0' },
      /^spec\.format: Invalid input: expected string/,
    ],
    [
      'no node',
      { url: '/d.csv', format: 'csv' },
      /^spec\.nodeName: Invalid input: expected string/,
    ],
    [
      'a bad node name',
      { url: '/d.csv', format: 'csv', nodeName: 'Edge 0' },
      /^spec\.nodeName: must be a lowercase RFC 1123 subdomain$/,
    ],
  ])('refuses %s, naming the field', (_what, spec, message) => {
    expect(() => parseInput(datasetSpec, spec, 'spec')).toThrow(message);
  });
});

describe('the federated-digits sample', () => {
  const docs = parseAllDocuments(
    readFileSync(new URL('knative/samples/federated-digits.yaml', root), 'utf8'),
  ).map((d) => d.toJS() as { kind: string; metadata: { name: string }; spec: unknown });
  const named = (kind: string) => docs.filter((d) => d.kind === kind).map((d) => d.metadata.name);

  it('is valid, and names only Datasets and the Model it defines', () => {
    for (const d of docs.filter((x) => x.kind === 'Dataset'))
      parseInput(datasetSpec, d.spec, `${d.metadata.name}.spec`);
    for (const d of docs.filter((x) => x.kind === 'Model'))
      parseInput(modelSpec, d.spec, `${d.metadata.name}.spec`);
    const [flJob, ...more] = docs.filter((x) => x.kind === 'FederatedLearningJob');
    expect(more).toEqual([]);
    const spec = parseJob(flJob?.spec);
    expect(named('Model')).toEqual([spec.aggregationWorker.model.name]);
    expect(named('Dataset').sort()).toEqual(
      [...spec.trainingWorkers.map((w) => w.dataset.name), spec.evaluationDataset?.name].sort(),
    );
    expect(spec.trainingWorkers.map((w) => w.template.spec?.nodeName)).toEqual([
      'edge0',
      'edge1',
      'edge2',
    ]);
    expect(trainingParameters(spec)).toEqual({
      epochs: 1,
      batchSize: 32,
      learningRate: 0.01,
      seed: 1,
    });
    expect(maxRounds(spec)).toBe(20);
  });
});

describe('the CRDs', () => {
  type Crd = {
    spec: {
      names: { shortNames: string[] };
      versions: Array<{
        additionalPrinterColumns: Array<{ name: string; type: string; jsonPath: string }>;
        schema: { openAPIV3Schema: Json & { properties: { spec: Json } } };
      }>;
    };
  };
  const crds = customResourceDefinitions();
  const fl = crds['federatedlearningjobs.yaml'] as Crd;
  const ds = crds['datasets.yaml'] as Crd;
  const specSchema = fl.spec.versions[0]!.schema.openAPIV3Schema.properties.spec;
  const at = (schema: Json, ...path: string[]): Json =>
    path.reduce<Json>((node, step) => {
      if (step === '[]') return node['items'] as Json;
      return (node['properties'] as Record<string, Json>)[step]!;
    }, schema);

  it("have Sedna's short name fl and none for datasets (ds is DaemonSet's)", () => {
    expect(fl.spec.names.shortNames).toEqual(['fl']);
    expect(ds.spec.names.shortNames).toEqual([]);
  });

  it('show the phase, round, accuracy and workers; the node and format of a dataset', () => {
    expect(fl.spec.versions[0]!.additionalPrinterColumns).toEqual([
      { name: 'Phase', type: 'string', jsonPath: '.status.phase' },
      expect.objectContaining({ name: 'Round', type: 'integer', jsonPath: '.status.round' }),
      expect.objectContaining({ name: 'Accuracy', type: 'number', jsonPath: '.status.accuracy' }),
      { name: 'Workers', type: 'integer', jsonPath: '.status.activeWorkers' },
      { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
    ]);
    expect(ds.spec.versions[0]!.additionalPrinterColumns.map((c) => c.jsonPath)).toEqual([
      '.spec.nodeName',
      '.spec.format',
      '.metadata.creationTimestamp',
    ]);
  });

  it('keep pod templates whole and check only what is read', () => {
    const template = at(specSchema, 'trainingWorkers', '[]', 'template');
    expect(template['x-kubernetes-preserve-unknown-fields']).toBe(true);
    expect(template['additionalProperties']).toBeUndefined();
    const env = at(template, 'spec', 'containers', '[]', 'env', '[]');
    expect(env).toMatchObject({
      required: ['name'],
      'x-kubernetes-preserve-unknown-fields': true,
    });
  });

  it('make minParticipants an int-or-string with both checks', () => {
    expect(at(specSchema, 'roundPolicy', 'minParticipants')).toEqual({
      description: expect.any(String) as unknown,
      'x-kubernetes-int-or-string': true,
      minimum: 1,
      maximum: Number.MAX_SAFE_INTEGER,
      pattern: '^(100|[1-9][0-9]?)%$',
    });
  });

  it('leave the defaults to the controller (zod), and say them', () => {
    const defaults: string[] = [];
    const walk = (node: Json, path: string): void => {
      if ('default' in node) defaults.push(path);
      for (const [key, child] of Object.entries((node['properties'] as Record<string, Json>) ?? {}))
        walk(child, `${path}.${key}`);
      if (node['items'] !== undefined) walk(node['items'] as Json, `${path}[]`);
      if (typeof node['additionalProperties'] === 'object')
        walk(node['additionalProperties'] as Json, `${path}{}`);
    };
    for (const crd of [fl, ds]) walk(crd.spec.versions[0]!.schema.openAPIV3Schema, '');
    expect(defaults).toEqual([]);
    expect(at(specSchema, 'trainingWorkers', '[]', 'restartPolicy')['description']).toMatch(
      /Default OnFailure\.$/,
    );
    expect(at(specSchema, 'roundPolicy', 'minParticipants')['description']).toMatch(
      /Default 100%\.$/,
    );
  });
});
