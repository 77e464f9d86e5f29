/**
 * Server-side Table output against what kube-apiserver returns: Accept negotiation, the Table
 * shape and includeObject, watch Tables, the CRD printer columns of our CRDs and Knative's, the
 * core kinds' printers, and kube's own HumanDuration and table convertor cases.
 */
import { describe, expect, it } from 'vitest';
import { customResourceDefinitions } from '../../../shared/crds/generate.js';
import { ApiError } from '../../../local/apiserver/store.js';
import type { KubeObject } from '../../../local/apiserver/store.js';
import { servedTypes } from '../../../local/apiserver/types.js';
import {
  columnsFor,
  crdColumns,
  humanDuration,
  includeObjectOf,
  negotiateOutput,
  tableOf,
  watchTableEncoder,
} from '../../../local/apiserver/table.js';
import type { TableOptions } from '../../../local/apiserver/table.js';
import type { PrinterColumn } from '../../../local/apiserver/types.js';
import { kubeObject } from '../../support/kube-objects.js';

const now = new Date('2026-03-01T12:00:00Z');
const s = 1000;
const m = 60 * s;
const h = 60 * m;
const d = 24 * h;
const ns = 1e-6; // in milliseconds

/** An RFC 3339 time `ago` milliseconds before `now`. */
function ago(ms: number): string {
  return new Date(now.getTime() - ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

const object = (kind: string, name: string, rest: Record<string, unknown> = {}) =>
  kubeObject(kind, name, {
    ...rest,
    metadata: { creationTimestamp: ago(5 * s), ...(rest['metadata'] as object | undefined) },
  });

const metadataOnly: TableOptions = { version: 'v1', includeObject: 'Metadata', now };

function cellsOf(type: Parameters<typeof columnsFor>[0], o: KubeObject) {
  return tableOf(columnsFor(type), [o], {}, metadataOnly).rows[0]!.cells;
}

function printerColumnsOf(file: string): PrinterColumn[] {
  const crd = customResourceDefinitions()[file] as {
    spec: { versions: Array<{ additionalPrinterColumns: PrinterColumn[] }> };
  };
  return crd.spec.versions[0]!.additionalPrinterColumns;
}

const jis = {
  group: 'edgeai.io',
  kind: 'JointInferenceService',
  columns: printerColumnsOf('jointinferenceservices.yaml'),
};

const nameDescription =
  'Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names';

describe('negotiateOutput', () => {
  const kubectl =
    'application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json';

  it.each([
    ['kubectl get', kubectl, { as: 'Table', version: 'v1' }],
    [
      'v1beta1 only',
      'application/json;as=Table;v=v1beta1;g=meta.k8s.io, application/json',
      { as: 'Table', version: 'v1beta1' },
    ],
    ['plain JSON', 'application/json', { as: 'Object' }],
    ['anything', '*/*', { as: 'Object' }],
    ['a JSON range', 'application/*;as=Table;g=meta.k8s.io;v=v1', { as: 'Table', version: 'v1' }],
    ['a watch stream', 'application/json;stream=watch', { as: 'Object' }],
    [
      'an unknown Table version falls through',
      'application/json;as=Table;v=v2;g=meta.k8s.io,application/json',
      { as: 'Object' },
    ],
    [
      'as=Table without the group falls through',
      'application/json;as=Table;v=v1,application/json',
      { as: 'Object' },
    ],
    [
      'PartialObjectMetadata (not served) falls through',
      'application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json',
      { as: 'Object' },
    ],
    [
      'quality orders the clauses',
      'application/json;q=0.5,application/json;as=Table;v=v1;g=meta.k8s.io',
      { as: 'Table', version: 'v1' },
    ],
  ])('%s', (_name, accept, expected) => {
    expect(negotiateOutput(accept)).toEqual(expected);
  });

  it('drops a parameter with no value, as goautoneg does', () => {
    // Only v=v1 is left: a conversion to no known group, which nothing serves.
    expect(negotiateOutput('application/json;as=;v=v1').as).toBe('NotAcceptable');
    expect(negotiateOutput('application/json;as;v=v1;g=meta.k8s.io').as).toBe('NotAcceptable');
  });

  it('serves JSON without an Accept header', () => {
    expect(negotiateOutput(undefined)).toEqual({ as: 'Object' });
    expect(negotiateOutput('')).toEqual({ as: 'Object' });
  });

  it('refuses what it cannot serve with kube 406 message', () => {
    for (const accept of [
      'application/yaml',
      'application/vnd.kubernetes.protobuf',
      'application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io',
      'application/json;stream=bogus',
    ]) {
      expect(negotiateOutput(accept)).toEqual({
        as: 'NotAcceptable',
        message: 'only the following media types are accepted: application/json',
      });
    }
  });
});

describe('includeObjectOf', () => {
  it('defaults to Metadata and takes the three policies', () => {
    expect(includeObjectOf(new URLSearchParams())).toBe('Metadata');
    expect(includeObjectOf(new URLSearchParams('includeObject='))).toBe('Metadata');
    for (const value of ['None', 'Metadata', 'Object'] as const) {
      expect(includeObjectOf(new URLSearchParams({ includeObject: value }))).toBe(value);
    }
  });

  it("refuses anything else with kube's 400", () => {
    let error: unknown;
    try {
      includeObjectOf(new URLSearchParams({ includeObject: 'metadata' }));
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ApiError);
    expect(error).toMatchObject({
      code: 400,
      reason: 'BadRequest',
      message: `Unable to convert to Table as requested: includeObject: Invalid value: "metadata": must be 'Metadata', 'Object', 'None', or empty`,
    });
  });
});

describe('humanDuration (apimachinery duration_test.go)', () => {
  it.each([
    [s, '1s'],
    [70 * s, '70s'],
    [190 * s, '3m10s'],
    [70 * m, '70m'],
    [47 * h, '47h'],
    [49 * h, '2d1h'],
    [(8 * 24 + 2) * h, '8d'],
    [367 * 24 * h, '367d'],
    [(365 * 2 * 24 + 25) * h, '2y1d'],
    [(365 * 8 * 24 + 2) * h, '8y'],
  ])('TestHumanDuration %d ms: %s', (ms, want) => {
    expect(humanDuration(ms)).toBe(want);
  });

  it.each([
    [-2 * s, '<invalid>'],
    [-2 * s + ns, '0s'],
    [0, '0s'],
    [s - 1, '0s'],
    [2 * m - 1, '119s'],
    [2 * m, '2m'],
    [2 * m + s, '2m1s'],
    [10 * m - 1, '9m59s'],
    [10 * m, '10m'],
    [10 * m + s, '10m'],
    [3 * h - 1, '179m'],
    [3 * h, '3h'],
    [3 * h + m, '3h1m'],
    [8 * h - 1, '7h59m'],
    [8 * h, '8h'],
    [8 * h + 59 * m, '8h'],
    [2 * d - 1, '47h'],
    [2 * d, '2d'],
    [2 * d + h, '2d1h'],
    [8 * d - 1, '7d23h'],
    [8 * d, '8d'],
    [8 * d + 23 * h, '8d'],
    [2 * 365 * d - 1, '729d'],
    [2 * 365 * d, '2y'],
    [2 * 365 * d + 23 * h, '2y'],
    [2 * 365 * d + 23 * h + 59 * m, '2y'],
    [2 * 365 * d + d - 1, '2y'],
    [2 * 365 * d + d, '2y1d'],
    [3 * 365 * d, '3y'],
    [4 * 365 * d, '4y'],
    [5 * 365 * d, '5y'],
    [6 * 365 * d, '6y'],
    [7 * 365 * d, '7y'],
    [8 * 365 * d - 1, '7y364d'],
    [8 * 365 * d, '8y'],
    [8 * 365 * d + 364 * d, '8y'],
    [9 * 365 * d, '9y'],
  ])('TestHumanDurationBoundaries %d ms: %s', (ms, want) => {
    expect(humanDuration(ms)).toBe(want);
  });
});

describe('JointInferenceService (its CRD printer columns)', () => {
  const ready = object('JointInferenceService', 'jis-a', {
    apiVersion: 'edgeai.io/v1alpha1',
    metadata: { creationTimestamp: ago(2 * h + 3 * m), labels: { app: 'demo' } },
    spec: { edgeWorker: { model: { name: 'small' } } },
    status: {
      conditions: [
        { type: 'DataDrift', status: 'False', reason: 'NoDrift' },
        { type: 'Ready', status: 'True', reason: 'WorkersReady' },
      ],
      edgeWorkerState: 'Running',
      cloudWorkerState: 'Running',
      uploadCount: 12,
      quality: { estimatedJointLoss: 1.25 },
    },
  });

  it('is the Table kube-apiserver returns', () => {
    const table = tableOf(columnsFor(jis), [ready], { resourceVersion: '42' }, metadataOnly);
    expect(table).toEqual({
      kind: 'Table',
      apiVersion: 'meta.k8s.io/v1',
      metadata: { resourceVersion: '42' },
      columnDefinitions: [
        { name: 'Name', type: 'string', format: 'name', description: nameDescription, priority: 0 },
        {
          name: 'Ready',
          type: 'string',
          format: '',
          description:
            'Custom resource definition column (in JSONPath format): .status.conditions[?(@.type=="Ready")].status',
          priority: 0,
        },
        {
          name: 'Edge',
          type: 'string',
          format: '',
          description:
            'Custom resource definition column (in JSONPath format): .status.edgeWorkerState',
          priority: 0,
        },
        {
          name: 'Cloud',
          type: 'string',
          format: '',
          description:
            'Custom resource definition column (in JSONPath format): .status.cloudWorkerState',
          priority: 0,
        },
        {
          name: 'Uploaded',
          type: 'integer',
          format: '',
          description:
            'Custom resource definition column (in JSONPath format): .status.uploadCount',
          priority: 0,
        },
        {
          name: 'Drift',
          type: 'string',
          format: '',
          description:
            'Custom resource definition column (in JSONPath format): .status.conditions[?(@.type=="DataDrift")].status',
          priority: 0,
        },
        {
          name: 'EstLoss',
          type: 'number',
          format: '',
          description: 'Estimated accuracy loss of the joint answers against the cloud, in points.',
          priority: 0,
        },
        {
          name: 'Age',
          type: 'date',
          format: '',
          description:
            'Custom resource definition column (in JSONPath format): .metadata.creationTimestamp',
          priority: 0,
        },
      ],
      rows: [
        {
          cells: ['jis-a', 'True', 'Running', 'Running', 12, 'False', 1.25, '123m'],
          object: {
            kind: 'PartialObjectMetadata',
            apiVersion: 'meta.k8s.io/v1',
            metadata: {
              name: 'jis-a',
              namespace: 'default',
              uid: 'uid-jis-a',
              resourceVersion: '7',
              generation: 1,
              creationTimestamp: ago(2 * h + 3 * m),
              labels: { app: 'demo' },
            },
          },
        },
      ],
    });
  });

  it('takes the same columns from the served type', () => {
    const served = servedTypes.find((t) => t.kind === 'JointInferenceService');
    expect(served).toBeDefined();
    expect(cellsOf(served!, ready)).toEqual(cellsOf(jis, ready));
    const names = (type: { group: string; kind: string }) =>
      tableOf(columnsFor(type), [], {}, metadataOnly).columnDefinitions?.map((c) => c.name);
    expect(names(servedTypes.find((t) => t.kind === 'Model')!)).toEqual([
      'Name',
      'Format',
      'URL',
      'Age',
    ]);
  });

  it('leaves the cells of a missing status null (kubectl prints them empty)', () => {
    const fresh = object('JointInferenceService', 'jis-b', { spec: {} });
    expect(cellsOf(jis, fresh)).toEqual(['jis-b', null, null, null, null, null, null, '5s']);
  });

  it('ages through hours and days as kubectl shows them', () => {
    const old = (age: number) =>
      cellsOf(
        jis,
        object('JointInferenceService', 'x', { metadata: { creationTimestamp: ago(age) } }),
      )[7];
    expect([old(7 * h + 5 * m), old(30 * h), old(3 * d + 4 * h), old(40 * d)]).toEqual([
      '7h5m',
      '30h',
      '3d4h',
      '40d',
    ]);
  });

  it('converts values of the wrong type to null, and integers to integers', () => {
    const odd = object('JointInferenceService', 'jis-c', {
      status: { uploadCount: '12', quality: { estimatedJointLoss: 2 }, edgeWorkerState: 3 },
    });
    // A string column prints any value; an integer column takes numbers only.
    expect(cellsOf(jis, odd).slice(1, 7)).toEqual([null, '3', null, null, null, 2]);
    const fraction = object('JointInferenceService', 'jis-d', { status: { uploadCount: 3.7 } });
    expect(cellsOf(jis, fraction)[4]).toBe(3);
  });
});

describe('CRD columns (apiextensions tableconvertor_test.go)', () => {
  /** One column of the given type over `.v`, and the cell it makes of `value`. */
  function cell(type: string, value: unknown) {
    const columns = crdColumns([{ name: 'V', type, jsonPath: '.v' }]);
    return tableOf(columns, [object('X', 'x', { v: value })], {}, metadataOnly).rows[0]!.cells[1];
  }

  it.each([
    ['integer', 42, 42],
    ['integer', 3.14, 3],
    ['integer', true, null],
    ['integer', 'foo', null],
    ['number', 42, 42],
    ['number', 3.14, 3.14],
    ['number', true, null],
    ['number', 'foo', null],
    ['boolean', 42, null],
    ['boolean', 3.14, null],
    ['boolean', true, true],
    ['boolean', 'foo', null],
    ['date', 42, null],
    ['date', 3.14, null],
    ['date', true, null],
    ['date', ago(12 * h + 30 * m), '12h'],
    ['date', ago(-(12 * h + 30 * m)), '<invalid>'],
    ['date', '', '<unknown>'],
    ['date', 'yesterday', '<invalid>'],
    ['date', '2026-02-30T00:00:00Z', '<invalid>'],
    ['date', '0001-01-01T00:00:00Z', '<unknown>'],
    ['date', '2026-03-01T13:59:00+02:00', '60s'],
    ['unknown', 'foo', null],
  ])('cellForJSONValue(%s, %j) = %j', (type, value, want) => {
    expect(cell(type, value)).toEqual(want);
  });

  it.each([
    [42, '42'],
    [3.14, '3.14'],
    [1234567.5, '1.2345675e+06'],
    [true, 'true'],
    ['foo', 'foo'],
    [null, '<no value>'],
    [{ b: 1, a: '<x>' }, '{"a":"\\u003cx\\u003e","b":1}'],
  ])('a string column prints %j as %j, as jsonpath PrintResults does', (value, want) => {
    expect(cell('string', value)).toBe(want);
  });

  it('takes the first result of a path with several, printing lists as JSON', () => {
    const paths = [
      '.spec.servers[0].hosts[0]',
      '.spec.servers[0].hosts',
      '.spec.servers[1].hosts',
      '.spec.servers[*].hosts',
    ];
    const columns = (type: string) =>
      crdColumns(paths.map((jsonPath, i) => ({ name: `c${i}`, type, jsonPath })));
    const istio = object('Blah', 'blah', {
      spec: { servers: [{ hosts: ['foo'] }, { hosts: ['bar', 'baz'] }] },
    });
    const row = (type: string, o: KubeObject) =>
      tableOf(columns(type), [o], {}, metadataOnly).rows[0]!.cells;
    expect(row('string', istio)).toEqual(['blah', 'foo', '["foo"]', '["bar","baz"]', '["foo"]']);

    const numbers = object('Blah', 'blah', {
      spec: { servers: [{ hosts: [1] }, { hosts: [2, 3] }] },
    });
    expect(row('string', numbers)).toEqual(['blah', '1', '[1]', '[2,3]', '[1]']);
    expect(row('integer', numbers)).toEqual(['blah', 1, null, null, null]);
  });

  it("evaluates kube's JSONPath: filters, quotes, keys, indexes and errors", () => {
    const o = object('X', 'x', {
      status: {
        conditions: [
          { type: 'Ready', status: 'False', reason: 'Pending', count: 1 },
          { type: 'Ready', status: 'True' },
        ],
        'odd.key': 'dotted',
      },
      spec: { url: null, list: [] },
    });
    const pick = (jsonPath: string) => {
      const columns = crdColumns([{ name: 'V', type: 'string', jsonPath }]);
      return tableOf(columns, [o], {}, metadataOnly).rows[0]!.cells[1];
    };
    expect(pick(".status.conditions[?(@.type=='Ready')].status")).toBe('False');
    expect(pick('.status.conditions[?(@.status!="False")].status')).toBe('True');
    expect(pick('.status.conditions[?(@.reason=="Pending")].type')).toBe('Ready');
    expect(pick('.status.conditions[?(@.count==1)].reason')).toBe('Pending');
    // Comparing a number with a string is an error in Go's templates: no cell.
    expect(pick('.status.conditions[?(@.count=="1")].reason')).toBeNull();
    expect(pick('.status.conditions[-1].status')).toBe('True');
    expect(pick(".status['conditions'][1].status")).toBe('True');
    expect(pick('.status.odd\\.key')).toBe('dotted');
    expect(pick('.spec.url')).toBe('<no value>');
    expect(pick('.spec.missing.deeper')).toBeNull();
    expect(pick('.spec.list[0]')).toBeNull(); // index out of bounds
    expect(pick('.status.conditions[5]')).toBeNull();
    expect(pick('.metadata.name[0]')).toBeNull(); // not a list
  });

  it('refuses a path kube would not parse, or this subset does not serve', () => {
    for (const jsonPath of ['.a[', '.a[?(@.b=="x"', '.a[?(@.b)]', '.a[1,2]', '..a', '.a[x]']) {
      expect(() => crdColumns([{ name: 'V', type: 'string', jsonPath }])).toThrow(
        /^unrecognized column definition/,
      );
    }
  });

  it('gives a CRD with no printer columns Name and Age', () => {
    const columns = columnsFor({ group: 'edgeai.io', kind: 'Thing', columns: [] });
    const table = tableOf(columns, [object('Thing', 't')], {}, metadataOnly);
    expect(table.columnDefinitions?.map((c) => [c.name, c.type, c.format])).toEqual([
      ['Name', 'string', 'name'],
      ['Age', 'date', ''],
    ]);
    expect(table.columnDefinitions?.[1]?.description).toMatch(/^CreationTimestamp is a timestamp/);
    expect(table.rows[0]!.cells).toEqual(['t', '5s']);
  });
});

describe('Knative Service (its CRD printer columns)', () => {
  const ksvc = { group: 'serving.knative.dev', kind: 'Service' };

  it('prints URL, revisions and the Ready condition', () => {
    const service = object('Service', 'edge', {
      status: {
        url: 'http://edge.default.example.com',
        latestCreatedRevisionName: 'edge-00002',
        latestReadyRevisionName: 'edge-00001',
        conditions: [{ type: 'Ready', status: 'False', reason: 'RevisionMissing' }],
      },
    });
    const table = tableOf(columnsFor(ksvc), [service], {}, metadataOnly);
    expect(table.columnDefinitions?.map((c) => c.name)).toEqual([
      'Name',
      'URL',
      'LatestCreated',
      'LatestReady',
      'Ready',
      'Reason',
    ]);
    expect(table.columnDefinitions?.[4]?.description).toBe(
      "Custom resource definition column (in JSONPath format): .status.conditions[?(@.type=='Ready')].status",
    );
    expect(table.rows[0]!.cells).toEqual([
      'edge',
      'http://edge.default.example.com',
      'edge-00002',
      'edge-00001',
      'False',
      'RevisionMissing',
    ]);
  });
});

describe('Node', () => {
  const node = (rest: Record<string, unknown>) => object('Node', 'edge-1', rest);
  const nodes = { group: '', kind: 'Node' };

  it("has kube's columns, the wide ones at priority 1", () => {
    const table = tableOf(columnsFor(nodes), [], { resourceVersion: '3' }, metadataOnly);
    expect(table.columnDefinitions?.map((c) => [c.name, c.priority])).toEqual([
      ['Name', 0],
      ['Status', 0],
      ['Roles', 0],
      ['Age', 0],
      ['Version', 0],
      ['Internal-IP', 1],
      ['External-IP', 1],
      ['OS-Image', 1],
      ['Kernel-Version', 1],
      ['Container-Runtime', 1],
    ]);
    expect(table.columnDefinitions?.[3]?.type).toBe('string');
    expect(table.rows).toEqual([]);
  });

  it('prints status, roles, age, version and the wide cells', () => {
    const ready = node({
      metadata: {
        creationTimestamp: ago(49 * h),
        labels: {
          'node-role.kubernetes.io/edge': '',
          'node-role.kubernetes.io/control-plane': '',
          'kubernetes.io/role': 'worker',
          'kubernetes.io/hostname': 'edge-1',
        },
      },
      spec: { unschedulable: true },
      status: {
        conditions: [
          { type: 'MemoryPressure', status: 'False' },
          { type: 'Ready', status: 'True' },
        ],
        addresses: [
          { type: 'Hostname', address: 'edge-1' },
          { type: 'InternalIP', address: '10.0.0.7' },
        ],
        nodeInfo: { kubeletVersion: 'v1.31.0', osImage: 'Ubuntu 24.04' },
      },
    });
    expect(cellsOf(nodes, ready)).toEqual([
      'edge-1',
      'Ready,SchedulingDisabled',
      'control-plane,edge,worker',
      '2d1h',
      'v1.31.0',
      '10.0.0.7',
      '<none>',
      'Ubuntu 24.04',
      '<unknown>',
      '<unknown>',
    ]);
  });

  it.each([
    [[{ type: 'Ready', status: 'False' }], 'NotReady'],
    [[{ type: 'Ready', status: 'Unknown' }], 'NotReady'],
    [
      [
        { type: 'Ready', status: 'False' },
        { type: 'Ready', status: 'True' },
      ],
      'Ready',
    ],
    [[{ type: 'DiskPressure', status: 'True' }], 'Unknown'],
    [undefined, 'Unknown'],
  ])('reads the Ready condition of %j as %s', (conditions, status) => {
    const cells = cellsOf(nodes, node({ status: { conditions } }));
    expect(cells.slice(1, 3)).toEqual([status, '<none>']);
  });
});

describe('Secret', () => {
  it('prints type, the number of keys and age', () => {
    const secret = object('Secret', 'token', {
      type: 'Opaque',
      data: { a: 'YQ==', b: 'Yg==' },
      metadata: { creationTimestamp: ago(26 * h) },
    });
    const secrets = { group: '', kind: 'Secret' };
    const table = tableOf(columnsFor(secrets), [secret], {}, metadataOnly);
    expect(table.columnDefinitions?.map((c) => c.name)).toEqual(['Name', 'Type', 'Data', 'Age']);
    expect(table.rows[0]!.cells).toEqual(['token', 'Opaque', 2, '26h']);
    expect(cellsOf(secrets, object('Secret', 'empty'))).toEqual(['empty', '', 0, '5s']);
  });
});

describe('Event', () => {
  const events = { group: '', kind: 'Event' };

  it("has kube's columns: Last Seen, Type, Reason, Object, Message, and wide ones", () => {
    const columns = tableOf(columnsFor(events), [], {}, metadataOnly).columnDefinitions;
    expect(columns?.map((c) => [c.name, c.priority])).toEqual([
      ['Last Seen', 0],
      ['Type', 0],
      ['Reason', 0],
      ['Object', 0],
      ['Subobject', 1],
      ['Source', 1],
      ['Message', 0],
      ['First Seen', 1],
      ['Count', 1],
      ['Name', 1],
    ]);
    expect(columns?.[9]?.format).toBe('name');
  });

  it('prints a core/v1 event', () => {
    const event = object('Event', 'jis-a.17f', {
      involvedObject: { kind: 'JointInferenceService', name: 'jis-a', namespace: 'default' },
      reason: 'WorkersReady',
      message: ' both workers are ready \n',
      type: 'Normal',
      source: { component: 'edgeai-controller' },
      firstTimestamp: ago(10 * m),
      lastTimestamp: ago(5 * m),
      count: 3,
    });
    expect(cellsOf(events, event)).toEqual([
      '5m',
      'Normal',
      'WorkersReady',
      'jointinferenceservice/jis-a',
      '',
      'edgeai-controller',
      'both workers are ready',
      '10m',
      3,
      'jis-a.17f',
    ]);
  });

  it('prints events.k8s.io-style events: eventTime, series, reporting component', () => {
    const series = object('Event', 'e1', {
      involvedObject: { kind: 'Node' },
      eventTime: '2026-03-01T11:00:00.000000Z',
      // 29.5s ago: Go truncates to 29s.
      series: { count: 4, lastObservedTime: '2026-03-01T11:59:30.500000Z' },
      reportingComponent: 'kubelet',
      reportingInstance: 'edge-1',
      type: 'Warning',
    });
    const cells = cellsOf(events, series);
    expect([cells[0], cells[3], cells[5], cells[7], cells[8]]).toEqual([
      '29s',
      'node',
      'kubelet, edge-1',
      '60m',
      4,
    ]);
    const singleton = object('Event', 'e2', { eventTime: '2026-03-01T11:58:00.000000Z' });
    const once = cellsOf(events, singleton);
    expect([once[0], once[7], once[8]]).toEqual(['2m', '2m', 1]);
    const bare = cellsOf(events, object('Event', 'e3'));
    expect([bare[0], bare[3], bare[7]]).toEqual(['<unknown>', '', '<unknown>']);
  });
});

describe('includeObject', () => {
  const o = object('Secret', 'token', { type: 'Opaque', data: { a: 'YQ==' } });
  const secrets = columnsFor({ group: '', kind: 'Secret' });

  it('None leaves the object out; Object puts it in whole', () => {
    const none = tableOf(secrets, [o], {}, { ...metadataOnly, includeObject: 'None' });
    expect(none.rows[0]!.object).toBeNull();
    const whole = tableOf(secrets, [o], {}, { ...metadataOnly, includeObject: 'Object' });
    expect(whole.rows[0]!.object).toEqual(o);
  });

  it('Metadata is a PartialObjectMetadata of the negotiated version', () => {
    const table = tableOf(
      secrets,
      [o],
      { resourceVersion: '9', continue: '', remainingItemCount: 0 },
      { ...metadataOnly, version: 'v1beta1' },
    );
    expect(table.apiVersion).toBe('meta.k8s.io/v1beta1');
    expect(table.metadata).toEqual({ resourceVersion: '9', remainingItemCount: 0 });
    expect(table.rows[0]!.object).toEqual({
      kind: 'PartialObjectMetadata',
      apiVersion: 'meta.k8s.io/v1beta1',
      metadata: o.metadata,
    });
  });
});

describe('watchTableEncoder', () => {
  it('sends the column definitions with the first event only, as kube does', () => {
    const encode = watchTableEncoder(columnsFor(jis), metadataOnly);
    const first = encode(
      object('JointInferenceService', 'a', { metadata: { resourceVersion: '11' } }),
    );
    const second = encode(
      object('JointInferenceService', 'b', { metadata: { resourceVersion: '12' } }),
    );
    expect(first.columnDefinitions).toHaveLength(8);
    expect(first.metadata).toEqual({ resourceVersion: '11' });
    expect(first.rows.map((r) => r.cells[0])).toEqual(['a']);
    expect(second.columnDefinitions).toBeNull();
    expect(second.metadata).toEqual({ resourceVersion: '12' });
    expect(second.rows).toHaveLength(1);
    expect(second.rows[0]!.cells).toHaveLength(8);
  });
});
