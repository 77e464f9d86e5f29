/**
 * The resource types the development API server serves: what the control plane touches. The
 * edgeai.io kinds come from their CustomResourceDefinitions (shared/crds, the source of
 * knative/crds/), with the schema the server validates against and the printer columns kubectl
 * shows, as a cluster that had the CRDs applied would serve them.
 */
import { customResourceDefinitions } from '../../shared/crds/generate.js';
import type { ResourceType } from './store.js';

/** A CRD's additionalPrinterColumns entry. */
interface PrinterColumn {
  name: string;
  type: string;
  jsonPath: string;
  description?: string;
  format?: string;
  priority?: number;
}

interface ServedType extends ResourceType {
  singular: string;
  shortNames: readonly string[];
  /** A custom resource's openAPIV3Schema, from its CRD. */
  schema?: Record<string, unknown>;
  /** A custom resource's additionalPrinterColumns, from its CRD. */
  columns?: readonly PrinterColumn[];
}

interface CrdVersion {
  name: string;
  served: boolean;
  subresources?: { status?: object };
  schema?: { openAPIV3Schema?: Record<string, unknown> };
  additionalPrinterColumns?: PrinterColumn[];
}

interface Crd {
  spec: {
    group: string;
    scope: 'Namespaced' | 'Cluster';
    names: { kind: string; plural: string; singular?: string; shortNames?: string[] };
    versions: CrdVersion[];
  };
}

/** The served versions of a CustomResourceDefinition. */
function typesOfCrd(crd: Crd): ServedType[] {
  const { group, scope, names } = crd.spec;
  return crd.spec.versions
    .filter((v) => v.served)
    .map((v) => ({
      group,
      version: v.name,
      plural: names.plural,
      kind: names.kind,
      singular: names.singular ?? names.kind.toLowerCase(),
      shortNames: names.shortNames ?? [],
      namespaced: scope === 'Namespaced',
      status: v.subresources?.status !== undefined,
      ...(v.schema?.openAPIV3Schema !== undefined ? { schema: v.schema.openAPIV3Schema } : {}),
      columns: v.additionalPrinterColumns ?? [],
    }));
}

function core(plural: string, kind: string, namespaced: boolean, status: boolean): ServedType {
  return {
    group: '',
    version: 'v1',
    plural,
    kind,
    singular: kind.toLowerCase(),
    shortNames: [],
    namespaced,
    status,
  };
}

const servedTypes: readonly ServedType[] = Object.freeze([
  { ...core('nodes', 'Node', false, true), shortNames: ['no'] },
  core('secrets', 'Secret', true, false),
  { ...core('events', 'Event', true, false), shortNames: ['ev'] },
  // Knative's own CRD is not ours to copy: served without a schema (anything is kept).
  {
    group: 'serving.knative.dev',
    version: 'v1',
    plural: 'services',
    kind: 'Service',
    singular: 'service',
    shortNames: ['kservice', 'ksvc'],
    namespaced: true,
    status: true,
  },
  ...Object.values(customResourceDefinitions()).flatMap((crd) => typesOfCrd(crd as Crd)),
]);

export { servedTypes };
export type { PrinterColumn, ServedType };
