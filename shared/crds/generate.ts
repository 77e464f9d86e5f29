/**
 * CustomResourceDefinitions generated from the zod schemas in schemas.ts, mlgraph.ts and
 * federated.ts. `npm run crds` writes them to knative/crds/; a test fails when the committed files
 * drift from this output.
 */
import { z } from 'zod';
import { stringify } from 'yaml';
import {
  jointInferenceServiceSpec,
  jointInferenceServiceStatus,
  modelSpec,
  modelStatus,
} from './schemas.js';
import { mlGraphSpec, mlGraphStatus } from './mlgraph.js';
import {
  datasetSpec,
  datasetStatus,
  federatedLearningJobSpec,
  federatedLearningJobStatus,
} from './federated.js';

const group = 'edgeai.io';
const version = 'v1alpha1';

/**
 * Makes zod's JSON Schema structural where zod's own output is not: a loose object (a pod
 * template) keeps unknown fields by x-kubernetes-preserve-unknown-fields, which excludes
 * additionalProperties; an int-or-string (a count or a percentage) is
 * x-kubernetes-int-or-string with its branches' value checks, pattern for strings and
 * minimum/maximum for integers, instead of zod's anyOf.
 *
 * zod's defaults stay zod's: the controller's parse fills them in, the server does not. A stored
 * spec is what was applied, and re-applying a manifest stays a no-op: kubectl apply's merge patch
 * replaces a custom resource's lists whole, so a list the server had defaulted (a job's
 * trainingWorkers) would differ from the manifest and be reported configured every time. The
 * descriptions say the defaults.
 */
function structural(schema: Record<string, unknown>): void {
  delete schema['default'];
  if (schema['x-kubernetes-preserve-unknown-fields'] === true && schema['properties'] !== undefined)
    delete schema['additionalProperties'];
  if (schema['x-kubernetes-int-or-string'] === true && Array.isArray(schema['anyOf'])) {
    for (const branch of schema['anyOf'] as Array<Record<string, unknown>>) {
      const { type: _type, ...checks } = branch;
      Object.assign(schema, checks);
    }
    delete schema['anyOf'];
  }
}

function openApi(schema: z.ZodType): Record<string, unknown> {
  const { $schema: _ignored, ...rest } = z.toJSONSchema(schema, {
    target: 'openapi-3.0',
    io: 'input',
    override: (ctx) => structural(ctx.jsonSchema as Record<string, unknown>),
  }) as Record<string, unknown>;
  return rest;
}

interface CrdOptions {
  kind: string;
  plural: string;
  shortNames: string[];
  spec: z.ZodType;
  status: z.ZodType;
  columns: Array<{ name: string; type: string; jsonPath: string; description?: string }>;
}

function crd(options: CrdOptions) {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${options.plural}.${group}` },
    spec: {
      group,
      names: {
        kind: options.kind,
        listKind: `${options.kind}List`,
        plural: options.plural,
        singular: options.kind.toLowerCase(),
        shortNames: options.shortNames,
      },
      scope: 'Namespaced',
      versions: [
        {
          name: version,
          served: true,
          storage: true,
          subresources: { status: {} },
          schema: {
            openAPIV3Schema: {
              type: 'object',
              required: ['spec'],
              properties: { spec: openApi(options.spec), status: openApi(options.status) },
            },
          },
          additionalPrinterColumns: options.columns,
        },
      ],
    },
  };
}

/** The Ready condition's status, every kind's first column. */
const readyColumn = {
  name: 'Ready',
  type: 'string',
  jsonPath: '.status.conditions[?(@.type=="Ready")].status',
};

/** Federated learning's CRDs (federated.ts), by file name. */
function federatedLearningDefinitions(): Record<string, unknown> {
  return {
    'federatedlearningjobs.yaml': crd({
      kind: 'FederatedLearningJob',
      plural: 'federatedlearningjobs',
      // Sedna's short name.
      shortNames: ['fl'],
      spec: federatedLearningJobSpec,
      status: federatedLearningJobStatus,
      columns: [
        { name: 'Phase', type: 'string', jsonPath: '.status.phase' },
        {
          name: 'Round',
          type: 'integer',
          jsonPath: '.status.round',
          description: 'The last completed round.',
        },
        {
          name: 'Accuracy',
          type: 'number',
          jsonPath: '.status.accuracy',
          description: 'Of the global model on the evaluation dataset, last evaluated.',
        },
        { name: 'Workers', type: 'integer', jsonPath: '.status.activeWorkers' },
        { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
      ],
    }),
    'datasets.yaml': crd({
      kind: 'Dataset',
      plural: 'datasets',
      // None, as Sedna's: ds is DaemonSet's.
      shortNames: [],
      spec: datasetSpec,
      status: datasetStatus,
      columns: [
        { name: 'Node', type: 'string', jsonPath: '.spec.nodeName' },
        { name: 'Format', type: 'string', jsonPath: '.spec.format' },
        { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
      ],
    }),
  };
}

/** The CRDs, by file name under knative/crds/. */
function customResourceDefinitions(): Record<string, unknown> {
  return {
    'jointinferenceservices.yaml': crd({
      kind: 'JointInferenceService',
      plural: 'jointinferenceservices',
      shortNames: ['jointinferenceservice', 'jis'],
      spec: jointInferenceServiceSpec,
      status: jointInferenceServiceStatus,
      columns: [
        readyColumn,
        { name: 'Edge', type: 'string', jsonPath: '.status.edgeWorkerState' },
        { name: 'Cloud', type: 'string', jsonPath: '.status.cloudWorkerState' },
        { name: 'Uploaded', type: 'integer', jsonPath: '.status.uploadCount' },
        {
          name: 'Drift',
          type: 'string',
          jsonPath: '.status.conditions[?(@.type=="DataDrift")].status',
        },
        {
          name: 'EstLoss',
          type: 'number',
          jsonPath: '.status.quality.estimatedJointLoss',
          description: 'Estimated accuracy loss of the joint answers against the cloud, in points.',
        },
        { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
      ],
    }),
    'models.yaml': crd({
      kind: 'Model',
      plural: 'models',
      shortNames: [],
      spec: modelSpec,
      status: modelStatus,
      columns: [
        { name: 'Format', type: 'string', jsonPath: '.spec.format' },
        { name: 'URL', type: 'string', jsonPath: '.spec.url' },
        { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
      ],
    }),
    'mlgraphs.yaml': crd({
      kind: 'MLGraph',
      plural: 'mlgraphs',
      shortNames: ['mlg'],
      spec: mlGraphSpec,
      status: mlGraphStatus,
      columns: [
        readyColumn,
        { name: 'Nodes', type: 'integer', jsonPath: '.status.nodeCount' },
        { name: 'URL', type: 'string', jsonPath: '.status.url' },
        { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
      ],
    }),
    ...federatedLearningDefinitions(),
  };
}

/** The YAML text of each CRD file. */
function renderCustomResourceDefinitions(): Record<string, string> {
  const header =
    '# Generated by `npm run crds` from the zod schemas in shared/crds/. Do not edit.\n';
  return Object.fromEntries(
    Object.entries(customResourceDefinitions()).map(([file, object]) => [
      file,
      header + stringify(object, { lineWidth: 0 }),
    ]),
  );
}

export { customResourceDefinitions, renderCustomResourceDefinitions };
