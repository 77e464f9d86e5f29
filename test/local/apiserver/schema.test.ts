/**
 * The CRD schema checks against kube's own words. Cases marked "kube:" are ported from
 * apiextensions-apiserver pkg/apiserver/validation/validation_test.go (TestValidateCustomResource),
 * which compares the rendered field errors as sets, as these tests do.
 */
import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import {
  admit,
  coerce,
  crdSchema,
  invalidStatus,
  strictDecodingMessage,
  unknownFieldWarnings,
  validate,
} from '../../../local/apiserver/schema.js';
import type { FieldError, StructuralSchema } from '../../../local/apiserver/schema.js';
import { customResourceDefinitions } from '../../../shared/crds/generate.js';

type Json = Record<string, unknown>;

const crds = customResourceDefinitions();
const jisSchema = crdSchema(crds['jointinferenceservices.yaml'], 'v1alpha1')!;
const modelSchema = crdSchema(crds['models.yaml'], 'v1alpha1')!;

function helmetSample(): Json {
  const text = readFileSync(
    new URL('../../../knative/samples/helmet-detection-demo.yaml', import.meta.url),
    'utf8',
  );
  const documents = parseAllDocuments(text).map((d) => d.toJS() as Json);
  const found = documents.find((d) => d['kind'] === 'JointInferenceService');
  if (found === undefined) throw new Error('no JointInferenceService in the sample');
  return found;
}

/** The sample with `value` set at the dotted path under spec (created as needed). */
function withSpec(path: string, value: unknown): Json {
  const object = helmetSample();
  let node = object['spec'] as Json;
  const keys = path.split('.');
  for (const key of keys.slice(0, -1)) node = (node[key] ??= {}) as Json;
  if (value === undefined) delete node[keys.at(-1)!];
  else node[keys.at(-1)!] = value;
  return object;
}

/** Each error as Go's field.Error.Error() prints it, read back from the Status causes. */
function rendered(errors: FieldError[]): string[] {
  const causes = invalidStatus('T', '', 'x', errors).details.causes ?? [];
  return causes.map((c) => `${c.field}: ${c.message}`);
}

function jisErrors(object: Json): string[] {
  return rendered(admit(jisSchema, object).errors);
}

const object = (properties: Record<string, StructuralSchema>): StructuralSchema => ({
  type: 'object',
  properties,
});

describe('the JointInferenceService CRD', () => {
  it('admits the seed sample unchanged, with no errors and no unknown fields', () => {
    const sample = helmetSample();
    const result = admit(jisSchema, sample);
    expect(result.errors).toEqual([]);
    expect(result.unknownFields).toEqual([]);
    expect(result.object).toEqual(sample);
  });

  it('refuses a string threshold with exactly one type error at its path', () => {
    const { errors } = admit(
      jisSchema,
      withSpec('edgeWorker.hardExampleAlgorithm.parameters.threshold', 'high'),
    );
    const field = 'spec.edgeWorker.hardExampleAlgorithm.parameters.threshold';
    expect(errors).toEqual([
      {
        type: 'FieldValueTypeInvalid',
        field,
        badValue: 'string',
        detail: `${field} in body must be of type number: "string"`,
      },
    ]);
    expect(invalidStatus('JointInferenceService', 'edgeai.io', 'helmet', errors)).toEqual({
      message:
        `JointInferenceService.edgeai.io "helmet" is invalid: ${field}: Invalid value: "string": ` +
        `${field} in body must be of type number: "string"`,

      details: {
        name: 'helmet',
        group: 'edgeai.io',
        kind: 'JointInferenceService',
        causes: [
          {
            reason: 'FieldValueTypeInvalid',
            message: `Invalid value: "string": ${field} in body must be of type number: "string"`,
            field,
          },
        ],
      },
    });
  });

  it.each([
    [
      'enum',
      'edgeWorker.hardExampleAlgorithm.name',
      'Foo',
      'spec.edgeWorker.hardExampleAlgorithm.name: Unsupported value: "Foo": supported values: ' +
        '"IBT", "Threshold", "CrossEntropy", "Random", "EdgeOnly", "CloudOnly", "Margin"',
    ],
    [
      'minimum',
      'edgeWorker.hardExampleAlgorithm.parameters.threshold',
      -0.5,
      'spec.edgeWorker.hardExampleAlgorithm.parameters.threshold: Invalid value: -0.5: ' +
        'spec.edgeWorker.hardExampleAlgorithm.parameters.threshold in body should be greater than or equal to 0',
    ],
    [
      'maximum',
      'edgeWorker.hardExampleAlgorithm.parameters.threshold',
      2,
      'spec.edgeWorker.hardExampleAlgorithm.parameters.threshold: Invalid value: 2: ' +
        'spec.edgeWorker.hardExampleAlgorithm.parameters.threshold in body should be less than or equal to 1',
    ],
    [
      'maximum as a large integer',
      'edgeWorker.hardExampleAlgorithm.parameters.seed',
      1e16,
      'spec.edgeWorker.hardExampleAlgorithm.parameters.seed: Invalid value: 10000000000000000: ' +
        'spec.edgeWorker.hardExampleAlgorithm.parameters.seed in body should be less than or equal to 9007199254740991',
    ],
    [
      'maxLength',
      'edgeWorker.nodeName',
      'a'.repeat(254),
      'spec.edgeWorker.nodeName: Too long: may not be more than 253 bytes',
    ],
    [
      'minLength (before the pattern: only the first string failure is told)',
      'edgeWorker.nodeName',
      '',
      'spec.edgeWorker.nodeName: Invalid value: "": spec.edgeWorker.nodeName in body should be at least 1 chars long',
    ],
    [
      'pattern',
      'edgeWorker.nodeName',
      'Edge_0',
      'spec.edgeWorker.nodeName: Invalid value: "Edge_0": spec.edgeWorker.nodeName in body should match ' +
        "'^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'",
    ],
    ['required', 'cloudWorker', undefined, 'spec.cloudWorker: Required value'],
    [
      'type object',
      'edgeWorker.offload',
      'sync',
      'spec.edgeWorker.offload: Invalid value: "string": spec.edgeWorker.offload in body must be of type object: "string"',
    ],
    [
      'type of a map value (additionalProperties: the key joins with a dot)',
      'edgeWorker.nodeSelector',
      { zone: 5 },
      'spec.edgeWorker.nodeSelector.zone: Invalid value: "integer": spec.edgeWorker.nodeSelector.zone in body must be of type string: "integer"',
    ],
  ])('refuses %s with kube’s message', (_keyword, path, value, expected) => {
    expect(jisErrors(withSpec(path, value))).toEqual([expected]);
  });

  it('reports a fraction in an integer twice, as kube-openapi does (type, then range)', () => {
    expect(jisErrors(withSpec('edgeWorker.offload.deadlineMs', 1.5))).toEqual([
      'spec.edgeWorker.offload.deadlineMs: Invalid value: "number": spec.edgeWorker.offload.deadlineMs in body must be of type integer: "number"',
      '<nil>: Invalid value: "": Checked value must be of type integer (default format) in spec.edgeWorker.offload.deadlineMs',
    ]);
    // Go decodes 1.0 as float64(1), which kube-openapi accepts for an integer; JSON.parse agrees.
    const one = JSON.parse('{"deadlineMs": 1.0}') as Json;
    expect(jisErrors(withSpec('edgeWorker.offload', one))).toEqual([]);
  });

  it('paths items of arrays as [index] and nested fields after them with a dot', () => {
    const parameters = [{ key: 'a', value: '1' }, { key: '' }];
    expect(jisErrors(withSpec('edgeWorker.workerSpec.parameters', parameters))).toEqual([
      'spec.edgeWorker.workerSpec.parameters[1].key: Invalid value: "": spec.edgeWorker.workerSpec.parameters[1].key in body should be at least 1 chars long',
      'spec.edgeWorker.workerSpec.parameters[1].value: Required value',
    ]);
  });

  it('lists several errors in brackets, each once, and every one as a cause', () => {
    const body = withSpec('edgeWorker.hardExampleAlgorithm.name', 'Foo');
    delete (body['spec'] as Json)['cloudWorker'];
    const status = invalidStatus('JointInferenceService', 'edgeai.io', 'helmet', [
      ...admit(jisSchema, body).errors,
      ...admit(jisSchema, body).errors,
    ]);
    expect(status.message).toBe(
      'JointInferenceService.edgeai.io "helmet" is invalid: [' +
        'spec.edgeWorker.hardExampleAlgorithm.name: Unsupported value: "Foo": supported values: ' +
        '"IBT", "Threshold", "CrossEntropy", "Random", "EdgeOnly", "CloudOnly", "Margin", ' +
        'spec.cloudWorker: Required value]',
    );
    expect(status.details.causes).toHaveLength(4);
    expect(status.details.causes?.[1]).toEqual({
      reason: 'FieldValueRequired',
      message: 'Required value',
      field: 'spec.cloudWorker',
    });
  });

  it('requires spec', () => {
    const { spec: _spec, ...body } = helmetSample();
    expect(jisErrors(body)).toEqual(['spec: Required value']);
  });

  it('validates a /status update against the status schema, paths under status', () => {
    const body = { ...helmetSample(), status: { observedGeneration: -1, conditions: [{}] } };
    expect(rendered(validate(jisSchema, body, { subresource: 'status' }))).toEqual([
      'status.conditions[0].type: Required value',
      'status.conditions[0].status: Required value',
      'status.observedGeneration: Invalid value: -1: observedGeneration in body should be greater than or equal to 0',
    ]);
    expect(validate(jisSchema, helmetSample(), { subresource: 'status' })).toEqual([]);
  });
});

describe('the Model CRD', () => {
  const model = (spec: Json): Json => ({
    apiVersion: 'edgeai.io/v1alpha1',
    kind: 'Model',
    metadata: { name: 'small-model', namespace: 'default' },
    spec,
  });

  it('admits a model and refuses a bad URL and format', () => {
    expect(admit(modelSchema, model({ url: 'file:///m.onnx', format: 'onnx' })).errors).toEqual([]);
    expect(
      rendered(admit(modelSchema, model({ url: 'ftp://x', format: 'tflite' })).errors),
    ).toEqual([
      'spec.url: Invalid value: "ftp://x": spec.url in body should match \'^(file|https?|s3):\\/\\/\\S+$\'',
      'spec.format: Unsupported value: "tflite": supported values: "onnx"',
    ]);
  });
});

describe('pruning', () => {
  it('drops unknown fields at any depth and lists them sorted, in kube’s path format', () => {
    const body = helmetSample();
    const spec = body['spec'] as Json & { edgeWorker: Json & { workerSpec: Json } };
    Object.assign(body, { extra: 1 });
    (body['metadata'] as Json)['whatever'] = 'kept: metadata is the server’s';
    Object.assign(spec, { foo: 1, constructor: 'not a property' });
    spec.edgeWorker['bar'] = { nested: true };
    spec.edgeWorker['nodeSelector'] = { 'kubernetes.io/os': 'linux' };
    (spec.edgeWorker.workerSpec['parameters'] as Json[])[0]!['extra'] = 'x';

    const { object, unknownFields, errors } = admit(jisSchema, body);
    expect(unknownFields).toEqual([
      'extra',
      'spec.constructor',
      'spec.edgeWorker.bar',
      'spec.edgeWorker.workerSpec.parameters[0].extra',
      'spec.foo',
    ]);
    expect(errors).toEqual([]);
    const expected = helmetSample();
    (expected['metadata'] as Json)['whatever'] = 'kept: metadata is the server’s';
    (expected['spec'] as { edgeWorker: Json }).edgeWorker['nodeSelector'] = {
      'kubernetes.io/os': 'linux',
    };
    expect(object).toEqual(expected);
    expect((body['spec'] as Json)['foo']).toBe(1); // the input is left as it was
  });

  it('keeps unknown fields under x-kubernetes-preserve-unknown-fields, pruning known ones', () => {
    const schema = object({
      spec: object({
        free: {
          type: 'object',
          'x-kubernetes-preserve-unknown-fields': true,
          properties: { typed: object({ a: { type: 'string' } }) },
        },
        list: {
          type: 'array',
          'x-kubernetes-preserve-unknown-fields': true,
          items: object({ a: { type: 'string' } }),
        },
        closed: object({ a: { type: 'string' } }),
      }),
    });
    const body = {
      spec: {
        free: { anything: { deep: [1] }, typed: { a: 'x', b: 'pruned' } },
        list: [{ a: 'x', b: 'kept: items of a preserving array are skip-pruned' }],
        closed: { a: 'x', b: 'pruned' },
      },
    };
    const { object: result, unknownFields } = coerce(schema, body);
    expect(unknownFields).toEqual(['spec.closed.b', 'spec.free.typed.b']);
    expect(result).toEqual({
      spec: {
        free: { anything: { deep: [1] }, typed: { a: 'x' } },
        list: [{ a: 'x', b: 'kept: items of a preserving array are skip-pruned' }],
        closed: { a: 'x' },
      },
    });
  });

  it('keeps apiVersion, kind and metadata of an embedded resource', () => {
    const schema = object({
      spec: object({
        template: {
          type: 'object',
          'x-kubernetes-embedded-resource': true,
          properties: { spec: object({ a: { type: 'string' } }) },
        },
      }),
    });
    const template = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p' }, spec: { a: 'x' } };
    const {
      object: result,
      unknownFields,
      errors,
    } = admit(schema, {
      spec: { template: { ...template, other: 1 } },
    });
    expect(unknownFields).toEqual(['spec.template.other']);
    expect(result).toEqual({ spec: { template } });
    expect(errors).toEqual([]);
  });
});

describe('field validation answers', () => {
  it('words the Strict 400 as kube does', () => {
    expect(
      strictDecodingMessage('JointInferenceService', 'v1alpha1', ['spec.bar', 'spec.foo']),
    ).toBe(
      'JointInferenceService in version "v1alpha1" cannot be handled as a JointInferenceService: ' +
        'strict decoding error: unknown field "spec.bar", unknown field "spec.foo"',
    );
  });

  it('makes one Warning header per unknown field, deduplicated', () => {
    expect(unknownFieldWarnings(['spec.foo', 'spec.foo', 'spec.a"b'])).toEqual([
      '299 - "unknown field \\"spec.foo\\""',
      '299 - "unknown field \\"spec.a\\"b\\""',
    ]);
    expect(unknownFieldWarnings(['spec.\n'])).toEqual([]);
  });

  it('truncates warnings past 4096 characters as the apiserver recorder does', () => {
    const paths = Array.from({ length: 40 }, (_, i) => `spec.${i}`.padEnd(308, 'x'));
    const texts = unknownFieldWarnings(paths).map((h) =>
      h.slice('299 - "'.length, -1).replaceAll('\\"', '"'),
    );
    // 12 warnings of 324 characters fit; the 13th restarts all cut to 256, until 4096 is reached.
    expect(texts).toHaveLength(16);
    expect(texts.every((t) => t.length === 256)).toBe(true);
    expect(texts[15]).toBe(`unknown field "${paths[15]}"`.slice(0, 256));
  });
});

describe('nullable and defaults', () => {
  const schema = object({
    spec: {
      type: 'object',
      properties: {
        mode: { type: 'string', default: 'auto' },
        plain: { type: 'string' },
        maybe: { type: 'string', nullable: true },
        nested: {
          type: 'object',
          default: { x: 1, junk: 2 },
          properties: {
            x: { type: 'integer' },
            y: { type: 'integer', default: 7 },
          },
        },
        list: { type: 'array', items: { type: 'string' } },
        withDefaults: { type: 'array', items: { type: 'string', default: 'd' } },
      },
    },
  });

  it('drops non-nullable nulls without a default, defaults the others, keeps nullable nulls', () => {
    const {
      object: result,
      errors,
      unknownFields,
    } = admit(schema, {
      spec: { mode: null, plain: null, maybe: null, withDefaults: [null, 'b'] },
    });
    expect(result).toEqual({
      spec: {
        mode: 'auto',
        maybe: null,
        nested: { x: 1, y: 7 }, // the default pruned, then defaulted inside
        withDefaults: ['d', 'b'],
      },
    });
    expect(errors).toEqual([]);
    expect(unknownFields).toEqual([]); // a default's pruned fields are not the request's
  });

  it('keeps a non-nullable null item of a list, which then fails its type', () => {
    expect(rendered(admit(schema, { spec: { list: [null, 'a'] } }).errors)).toEqual([
      'spec.list[0]: Invalid value: "null": spec.list[0] in body must be of type string: "null"',
    ]);
  });

  it('does not default what is present', () => {
    expect(admit(schema, { spec: { mode: 'manual', nested: {} } }).object).toEqual({
      spec: { mode: 'manual', nested: { y: 7 } },
    });
  });
});

describe('keywords on hand-written schemas', () => {
  const check = (schema: StructuralSchema, field: unknown): string[] =>
    rendered(validate(object({ field: schema }), { field }));

  it.each<[string, StructuralSchema, unknown, string[]]>([
    [
      'exclusiveMinimum',
      { type: 'number', minimum: 0, exclusiveMinimum: true },
      0,
      ['field: Invalid value: 0: field in body should be greater than 0'],
    ],
    [
      'exclusiveMaximum',
      { type: 'integer', maximum: 10, exclusiveMaximum: true },
      10,
      ['field: Invalid value: 10: field in body should be less than 10'],
    ],
    [
      'a float bound, printed as Go prints a float64',
      { type: 'number', maximum: 1e6 },
      2000000.5,
      ['field: Invalid value: 2.0000005e+06: field in body should be less than or equal to 1e+06'],
    ],
    [
      'multipleOf',
      { type: 'integer', multipleOf: 5 },
      12,
      ['field: Invalid value: 12: field in body should be a multiple of 5'],
    ],
    [
      'multipleOf a fraction',
      { type: 'number', multipleOf: 0.5 },
      0.75,
      ['field: Invalid value: 0.75: field in body should be a multiple of 0.5'],
    ],
    [
      'minItems',
      { type: 'array', minItems: 1, items: { type: 'string' } },
      [],
      ['field: Invalid value: 0: field in body should have at least 1 items'],
    ],
    [
      'maxItems',
      { type: 'array', maxItems: 1, items: { type: 'string' } },
      ['a', 'b'],
      ['field: Too many: 2: must have at most 1 item'],
    ],
    [
      'uniqueItems',
      { type: 'array', uniqueItems: true, items: { type: 'object' } },
      [{ a: 1 }, { a: 1 }],
      ['field: Invalid value: "": field in body shouldn\'t contain duplicates'],
    ],
    [
      'minProperties',
      { type: 'object', minProperties: 1 },
      {},
      ['field: Invalid value: 0: field in body should have at least 1 properties'],
    ],
    [
      'enum of numbers',
      { type: 'integer', enum: [1, 2] },
      3,
      ['field: Unsupported value: 3: supported values: "1", "2"'],
    ],
    [
      'int32 range',
      { type: 'integer', format: 'int32' },
      2 ** 31,
      [
        '<nil>: Invalid value: "": Checked value must be of type integer with format int32 in field',
      ],
    ],
    [
      'date-time',
      { type: 'string', format: 'date-time' },
      '2024-13-01T00:00:00Z',
      [
        'field: Invalid value: "2024-13-01T00:00:00Z": field in body must be of type date-time: "2024-13-01T00:00:00Z"',
      ],
    ],
    [
      'byte',
      { type: 'string', format: 'byte' },
      'abc',
      ['field: Invalid value: "abc": field in body must be of type byte: "abc"'],
    ],
    [
      'a number where a date-time is',
      { type: 'string', format: 'date-time' },
      5,
      ['field: Invalid value: "int64": field in body must be of type date-time: "int64"'],
    ],
    [
      'oneOf with two matches',
      { oneOf: [{ minimum: 0 }, { maximum: 10 }] },
      5,
      [
        '<nil>: Invalid value: "": "field" must validate one and only one schema (oneOf). Found 2 valid alternatives',
      ],
    ],
    [
      'not',
      { not: { enum: ['x'] } },
      'x',
      ['<nil>: Invalid value: "": "field" must not validate the schema (not)'],
    ],
  ])('%s', (_name, schema, value, expected) => {
    expect(check(schema, value)).toEqual(expected);
  });

  it.each<[StructuralSchema, unknown]>([
    [{ type: 'string', format: 'date-time' }, '2024-02-29T23:59:59.5+01:00'],
    [{ type: 'string', format: 'byte' }, 'aGVsbG8='],
    [{ type: 'string', format: 'email' }, 'not checked here'],
    [{ type: 'integer', format: 'int32' }, -(2 ** 31)],
    [{ type: 'number', multipleOf: 0.1 }, 0.3],
    [{ 'x-kubernetes-int-or-string': true }, '50%'],
    [{ 'x-kubernetes-int-or-string': true }, 5],
    [{ type: 'string', enum: ['A'] }, 'A'],
  ])('accepts %j: %j', (schema, value) => {
    expect(check(schema, value)).toEqual([]);
  });

  it('requires apiVersion and kind of an embedded resource, checking the kind', () => {
    const schema = object({
      spec: object({
        template: { type: 'object', 'x-kubernetes-embedded-resource': true },
        templates: {
          type: 'object',
          additionalProperties: { type: 'object', 'x-kubernetes-embedded-resource': true },
        },
      }),
    });
    const body = {
      spec: {
        template: { metadata: {} },
        templates: { a: { apiVersion: 'a/b/c', kind: 'My_Kind' } },
      },
    };
    expect(rendered(admit(schema, body).errors)).toEqual([
      'spec.template.apiVersion: Required value',
      'spec.template.kind: Required value',
      'spec.templates[a].apiVersion: Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c',
      'spec.templates[a].kind: Invalid value: "My_Kind": may have mixed case, but should otherwise ' +
        "match: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start " +
        "with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or " +
        "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
    ]);
  });
});

describe('kube: TestValidateCustomResource', () => {
  const cases: Array<[string, StructuralSchema, unknown[], Array<[unknown, string[]]>]> = [
    [
      '!nullable',
      { type: 'object', nullable: false },
      [undefined, {}],
      [
        ['foo', ['field: Invalid value: "string": field in body must be of type object: "string"']],
        [42, ['field: Invalid value: "integer": field in body must be of type object: "integer"']],
        [
          true,
          ['field: Invalid value: "boolean": field in body must be of type object: "boolean"'],
        ],
        [1.2, ['field: Invalid value: "number": field in body must be of type object: "number"']],
        [[], ['field: Invalid value: "array": field in body must be of type object: "array"']],
        [null, ['field: Invalid value: "null": field in body must be of type object: "null"']],
      ],
    ],
    [
      'nullable',
      { type: 'object', nullable: true },
      [undefined, {}, null],
      [
        ['foo', ['field: Invalid value: "string": field in body must be of type object: "string"']],
        [42, ['field: Invalid value: "integer": field in body must be of type object: "integer"']],
        [[], ['field: Invalid value: "array": field in body must be of type object: "array"']],
      ],
    ],
    [
      'nullable and no type',
      { nullable: true },
      [undefined, {}, null, 'foo', 42, true, 1.2, []],
      [],
    ],
    [
      'x-kubernetes-int-or-string',
      { 'x-kubernetes-int-or-string': true },
      [undefined, 42, 'foo'],
      [
        [
          null,
          ['field: Invalid value: "null": field in body must be of type integer,string: "null"'],
        ],
        [
          true,
          [
            'field: Invalid value: "boolean": field in body must be of type integer,string: "boolean"',
          ],
        ],
        [
          1.2,
          [
            'field: Invalid value: "number": field in body must be of type integer,string: "number"',
          ],
        ],
        [
          {},
          [
            'field: Invalid value: "object": field in body must be of type integer,string: "object"',
          ],
        ],
        [
          [],
          ['field: Invalid value: "array": field in body must be of type integer,string: "array"'],
        ],
      ],
    ],
    [
      'nullable, x-kubernetes-int-or-string and user-provided anyOf',
      {
        nullable: true,
        'x-kubernetes-int-or-string': true,
        anyOf: [{ type: 'integer' }, { type: 'string' }],
      },
      [undefined, null, 42, 'foo'],
      [
        [
          true,
          [
            '<nil>: Invalid value: "": "field" must validate at least one schema (anyOf)',
            'field: Invalid value: "boolean": field in body must be of type integer,string: "boolean"',
            'field: Invalid value: "boolean": field in body must be of type integer: "boolean"',
          ],
        ],
        [
          1.2,
          [
            '<nil>: Invalid value: "": "field" must validate at least one schema (anyOf)',
            'field: Invalid value: "number": field in body must be of type integer,string: "number"',
            'field: Invalid value: "number": field in body must be of type integer: "number"',
            '<nil>: Invalid value: "": Checked value must be of type integer (default format) in field',
          ],
        ],
        [
          [],
          [
            '<nil>: Invalid value: "": "field" must validate at least one schema (anyOf)',
            'field: Invalid value: "array": field in body must be of type integer,string: "array"',
            'field: Invalid value: "array": field in body must be of type integer: "array"',
          ],
        ],
      ],
    ],
    [
      'nullable, x-kubernetes-int-or-string and user-provider allOf',
      {
        nullable: true,
        'x-kubernetes-int-or-string': true,
        allOf: [{ anyOf: [{ type: 'integer' }, { type: 'string' }] }],
      },
      [undefined, null, 42, 'foo'],
      [
        [
          {},
          [
            '<nil>: Invalid value: "": "field" must validate all the schemas (allOf). None validated',
            '<nil>: Invalid value: "": "field" must validate at least one schema (anyOf)',
            'field: Invalid value: "object": field in body must be of type integer,string: "object"',
            'field: Invalid value: "object": field in body must be of type integer: "object"',
          ],
        ],
      ],
    ],
    [
      'numeric formats invalid',
      { type: 'integer', format: 'int64' },
      [-(2 ** 63), 0],
      [
        [
          2 ** 63 * 1.1,
          [
            'field: Invalid value: "float64": field in body must be of type int64: "float64"',
            '<nil>: Invalid value: "": Checked value must be of type integer with format int64 in field',
          ],
        ],
      ],
    ],
    [
      'float format',
      { type: 'number', format: 'float' },
      [3.4028234663852886e38, -3.4028234663852886e38],
      [
        [
          3.4028234663852886e38 * 1.1,
          [
            '<nil>: Invalid value: "": Checked value must be of type number with format float in field',
          ],
        ],
      ],
    ],
    [
      'double format',
      { type: 'number', format: 'double' },
      [Number.MAX_VALUE, -Number.MAX_VALUE],
      [],
    ],
  ];

  describe.each(cases)('%s', (_name, field, passing, failing) => {
    const schema = object({ field });
    const body = (value: unknown): Json => (value === undefined ? {} : { field: value });

    it.each(passing.map((v) => [v]))('accepts %j', (value) => {
      expect(validate(schema, body(value))).toEqual([]);
    });

    if (failing.length > 0) {
      it.each(failing)('refuses %j', (value, expected) => {
        expect(rendered(validate(schema, body(value))).sort()).toEqual([...expected].sort());
      });
    }
  });

  it('required field', () => {
    const schema: StructuralSchema = {
      type: 'object',
      required: ['field'],
      properties: { field: { type: 'object', required: ['nested'], properties: { nested: {} } } },
    };
    expect(rendered(validate(schema, { test: 'a' }))).toEqual(['field: Required value']);
    expect(rendered(validate(schema, { field: {} }))).toEqual(['field.nested: Required value']);
  });

  it('enum', () => {
    const schema = object({
      field: {
        type: 'object',
        required: ['nestedint', 'nestedstring'],
        properties: {
          nestedint: { type: 'integer', enum: [1, 2] },
          nestedstring: { type: 'string', enum: ['a', 'b'] },
        },
      },
    });
    expect(rendered(validate(schema, { field: {} }))).toEqual([
      'field.nestedint: Required value',
      'field.nestedstring: Required value',
    ]);
    expect(
      rendered(validate(schema, { field: { nestedint: 'x', nestedstring: true } })).sort(),
    ).toEqual(
      [
        'field.nestedint: Invalid value: "string": field.nestedint in body must be of type integer: "string"',
        'field.nestedint: Unsupported value: "x": supported values: "1", "2"',
        'field.nestedstring: Invalid value: "boolean": field.nestedstring in body must be of type string: "boolean"',
        'field.nestedstring: Unsupported value: true: supported values: "a", "b"',
      ].sort(),
    );
  });

  it.each<[string, StructuralSchema, unknown, string]>([
    [
      'maxProperties',
      { type: 'object', maxProperties: 2 },
      { a: true, b: true, c: true },
      'fieldX: Too many: 3: must have at most 2 items',
    ],
    [
      'maxItems',
      { type: 'array', maxItems: 2 },
      ['a', 'b', 'c'],
      'fieldX: Too many: 3: must have at most 2 items',
    ],
    [
      'maxLength',
      { type: 'string', maxLength: 2 },
      'abc',
      'fieldX: Too long: may not be more than 2 bytes',
    ],
  ])('%s', (_name, fieldX, value, expected) => {
    expect(rendered(validate(object({ fieldX }), { fieldX: value }))).toEqual([expected]);
  });
});

describe('admit', () => {
  const schema = object({
    spec: {
      type: 'object',
      properties: {
        mode: { type: 'string', enum: ['a', 'b'], default: 'a' },
        count: { type: 'integer', minimum: 0, nullable: true },
        labels: { type: 'object', additionalProperties: { type: 'string' } },
        items: { type: 'array', items: object({ name: { type: 'string', default: 'x' } }) },
        free: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
      },
    },
  });
  const paths = [
    ['spec'],
    ['spec', 'mode'],
    ['spec', 'count'],
    ['spec', 'labels'],
    ['spec', 'items'],
    ['spec', 'free'],
    ['spec', 'other'],
    ['spec', 'edgeWorker', 'hardExampleAlgorithm', 'parameters', 'threshold'],
    ['spec', 'edgeWorker', 'nodeSelector'],
    ['spec', 'cloudWorker', 'workerSpec', 'parameters'],
    ['status'],
    ['other'],
  ];
  const mutation = fc.array(fc.tuple(fc.constantFrom(...paths), fc.jsonValue()), { maxLength: 4 });

  function mutate(base: Json, changes: Array<[string[], unknown]>): Json {
    const body = structuredClone(base);
    for (const [path, value] of changes) {
      let node: Json = body;
      for (const key of path.slice(0, -1)) {
        if (typeof node[key] !== 'object' || node[key] === null || Array.isArray(node[key]))
          node[key] = {};
        node = node[key] as Json;
      }
      node[path.at(-1)!] = value;
    }
    return body;
  }

  it('is idempotent: admitting what it admitted changes nothing and finds nothing unknown', () => {
    fc.assert(
      fc.property(fc.constantFrom(schema, jisSchema), mutation, (s, changes) => {
        const first = admit(s, mutate(helmetSample(), changes));
        const second = admit(s, first.object);
        expect(second.object).toEqual(first.object);
        expect(second.unknownFields).toEqual([]);
        expect(second.errors).toEqual(first.errors);
      }),
    );
  });
});
