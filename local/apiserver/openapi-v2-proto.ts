/**
 * `/openapi/v2` as protobuf: the gnostic `openapi.v2.Document` message (github.com/google/gnostic
 * openapiv2/OpenAPIv2.proto) encoding the Swagger 2.0 JSON document openapi.ts builds. kubectl
 * before 1.27 (Debian's kubectl 1.20 among them) reads v2 only in this form, and needs it for
 * client-side validation (`create/apply -f`), `explain` and the `--dry-run=server` check; `apply`
 * also computes strategic merge patches of built-in kinds from it:
 *
 * - kube-openapi pkg/util/proto (document.go) reads `definitions`: each Schema's `type`,
 *   `properties`, `items`, `additionalProperties`, `$ref`, `required`, `description`, `format`
 *   and its vendor extensions, whose values it parses from `Any.yaml` with yaml.v2 (kubectl finds
 *   a kind by `x-kubernetes-group-version-kind`, a strategic merge key by
 *   `x-kubernetes-patch-merge-key`).
 * - cli-runtime pkg/resource dry_run.go (`--dry-run=server`) reads `paths`: the PATCH operation
 *   whose `x-kubernetes-group-version-kind` is the object's must list a `dryRun` query parameter.
 *
 * The descriptor below declares only the messages and fields this document fills, with gnostic's
 * field numbers; a JSON keyword it has no field for is an error, so the protobuf never silently
 * says less than the JSON.
 */
import type { ServerResponse } from 'node:http';
import protobuf from 'protobufjs';

type Json = Record<string, unknown>;
type Message = Record<string, unknown>;

// ---------------------------------------------------------------------------------------------
// The descriptor. Field names are the JSON keywords (camelCase), so scalars copy across by name.

const field = (id: number, type: string) => ({ id, type });
const repeated = (id: number, type: string) => ({ id, type, rule: 'repeated' });
/** A gnostic map: an ordered list of (name, value) pairs. */
const named = (valueType: string) => ({
  fields: { name: field(1, 'string'), value: field(2, valueType) },
});
const wrapper = (type: string) => ({ fields: { additionalProperties: repeated(1, type) } });
const oneof = (fields: Record<string, { id: number; type: string }>) => ({
  oneofs: { oneof: { oneof: Object.keys(fields) } },
  fields,
});

/** The fields the query and path parameters share (both sub-schemas number them alike). */
const parameterFields = (offset: number, vendorExtension: number) => ({
  required: field(1, 'bool'),
  in: field(2, 'string'),
  description: field(3, 'string'),
  name: field(4, 'string'),
  type: field(5 + offset, 'string'),
  format: field(6 + offset, 'string'),
  uniqueItems: field(19 + offset, 'bool'),
  vendorExtension: repeated(vendorExtension, 'NamedAny'),
});

const messages = {
  Document: {
    fields: {
      swagger: field(1, 'string'),
      info: field(2, 'Info'),
      paths: field(8, 'Paths'),
      definitions: field(9, 'Definitions'),
      security: repeated(12, 'SecurityRequirement'),
      securityDefinitions: field(13, 'SecurityDefinitions'),
      vendorExtension: repeated(16, 'NamedAny'),
    },
  },
  Info: {
    fields: {
      title: field(1, 'string'),
      version: field(2, 'string'),
      description: field(3, 'string'),
      vendorExtension: repeated(7, 'NamedAny'),
    },
  },
  Any: { fields: { yaml: field(2, 'string') } },
  NamedAny: named('Any'),
  Paths: {
    fields: { vendorExtension: repeated(1, 'NamedAny'), path: repeated(2, 'NamedPathItem') },
  },
  NamedPathItem: named('PathItem'),
  PathItem: {
    fields: {
      get: field(2, 'Operation'),
      put: field(3, 'Operation'),
      post: field(4, 'Operation'),
      delete: field(5, 'Operation'),
      patch: field(8, 'Operation'),
      parameters: repeated(9, 'ParametersItem'),
      vendorExtension: repeated(10, 'NamedAny'),
    },
  },
  Operation: {
    fields: {
      tags: repeated(1, 'string'),
      summary: field(2, 'string'),
      description: field(3, 'string'),
      operationId: field(5, 'string'),
      produces: repeated(6, 'string'),
      consumes: repeated(7, 'string'),
      parameters: repeated(8, 'ParametersItem'),
      responses: field(9, 'Responses'),
      schemes: repeated(10, 'string'),
      deprecated: field(11, 'bool'),
      vendorExtension: repeated(13, 'NamedAny'),
    },
  },
  ParametersItem: oneof({
    parameter: field(1, 'Parameter'),
    jsonReference: field(2, 'JsonReference'),
  }),
  JsonReference: { fields: { _ref: field(1, 'string'), description: field(2, 'string') } },
  Parameter: oneof({
    bodyParameter: field(1, 'BodyParameter'),
    nonBodyParameter: field(2, 'NonBodyParameter'),
  }),
  BodyParameter: {
    fields: {
      description: field(1, 'string'),
      name: field(2, 'string'),
      in: field(3, 'string'),
      required: field(4, 'bool'),
      schema: field(5, 'Schema'),
      vendorExtension: repeated(6, 'NamedAny'),
    },
  },
  NonBodyParameter: oneof({
    queryParameterSubSchema: field(3, 'QueryParameterSubSchema'),
    pathParameterSubSchema: field(4, 'PathParameterSubSchema'),
  }),
  // The query sub-schema has allowEmptyValue (5) where the path one has none: its fields shift by 1.
  QueryParameterSubSchema: { fields: parameterFields(1, 23) },
  PathParameterSubSchema: { fields: parameterFields(0, 22) },
  Responses: {
    fields: {
      responseCode: repeated(1, 'NamedResponseValue'),
      vendorExtension: repeated(2, 'NamedAny'),
    },
  },
  NamedResponseValue: named('ResponseValue'),
  ResponseValue: oneof({
    response: field(1, 'Response'),
    jsonReference: field(2, 'JsonReference'),
  }),
  Response: {
    fields: {
      description: field(1, 'string'),
      schema: field(2, 'SchemaItem'),
      vendorExtension: repeated(5, 'NamedAny'),
    },
  },
  SchemaItem: oneof({ schema: field(1, 'Schema') }),
  Definitions: wrapper('NamedSchema'),
  Properties: wrapper('NamedSchema'),
  NamedSchema: named('Schema'),
  Schema: {
    fields: {
      _ref: field(1, 'string'),
      format: field(2, 'string'),
      title: field(3, 'string'),
      description: field(4, 'string'),
      default: field(5, 'Any'),
      multipleOf: field(6, 'double'),
      maximum: field(7, 'double'),
      exclusiveMaximum: field(8, 'bool'),
      minimum: field(9, 'double'),
      exclusiveMinimum: field(10, 'bool'),
      maxLength: field(11, 'int64'),
      minLength: field(12, 'int64'),
      pattern: field(13, 'string'),
      maxItems: field(14, 'int64'),
      minItems: field(15, 'int64'),
      uniqueItems: field(16, 'bool'),
      maxProperties: field(17, 'int64'),
      minProperties: field(18, 'int64'),
      required: repeated(19, 'string'),
      enum: repeated(20, 'Any'),
      additionalProperties: field(21, 'AdditionalPropertiesItem'),
      type: field(22, 'TypeItem'),
      items: field(23, 'ItemsItem'),
      allOf: repeated(24, 'Schema'),
      properties: field(25, 'Properties'),
      readOnly: field(27, 'bool'),
      example: field(30, 'Any'),
      vendorExtension: repeated(31, 'NamedAny'),
    },
  },
  AdditionalPropertiesItem: oneof({ schema: field(1, 'Schema'), boolean: field(2, 'bool') }),
  TypeItem: { fields: { value: repeated(1, 'string') } },
  ItemsItem: { fields: { schema: repeated(1, 'Schema') } },
  SecurityDefinitions: wrapper('NamedSecurityDefinitionsItem'),
  NamedSecurityDefinitionsItem: named('SecurityDefinitionsItem'),
  SecurityDefinitionsItem: oneof({ apiKeySecurity: field(2, 'ApiKeySecurity') }),
  ApiKeySecurity: {
    fields: {
      type: field(1, 'string'),
      name: field(2, 'string'),
      in: field(3, 'string'),
      description: field(4, 'string'),
      vendorExtension: repeated(5, 'NamedAny'),
    },
  },
  SecurityRequirement: wrapper('NamedStringArray'),
  NamedStringArray: named('StringArray'),
  StringArray: { fields: { value: repeated(1, 'string') } },
} satisfies Record<string, protobuf.IType>;

type MessageName = keyof typeof messages;

const root = protobuf.Root.fromJSON({
  nested: { openapi: { nested: { v2: { nested: messages } } } },
}).resolveAll();
const typeOf = (name: MessageName) => root.lookupType(`openapi.v2.${name}`);

/** The `openapi.v2.Document` type, to decode what the server sends (tests, tools). */
const openApiV2DocumentType = typeOf('Document');

// ---------------------------------------------------------------------------------------------
// JSON to message.

const isJson = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

function json(value: unknown, where: string): Json {
  if (!isJson(value)) throw new Error(`openapi v2 protobuf: ${where} is not an object`);
  return value;
}

const list = (value: unknown): unknown[] => (Array.isArray(value) ? value : [value]);

/** gnostic's Any: the value as YAML text; JSON is YAML, and kubectl reads it with yaml.v2. */
const any = (value: unknown): Message => ({ yaml: JSON.stringify(value) });

/** A JSON object as a gnostic map: (name, value) pairs in the object's order. */
const pairs = (value: unknown, where: string, convert: (v: unknown) => Message): Message[] =>
  Object.entries(json(value, where)).map(([name, v]) => ({ name, value: convert(v) }));

/** How one JSON keyword becomes fields of the message (message-typed fields need one). */
type Rules = Readonly<Record<string, (value: unknown) => Message>>;

/**
 * `value` as message `name`: `x-` keywords become vendor extensions, keywords with a rule are
 * converted by it, and the rest copy to the scalar field of the same name.
 */
function message(name: MessageName, value: unknown, rules: Rules = {}): Message {
  const type = typeOf(name);
  const out: Message = {};
  const extensions: Message[] = [];
  for (const [key, v] of Object.entries(json(value, name))) {
    const rule = rules[key];
    if (rule !== undefined) Object.assign(out, rule(v));
    else if (key.startsWith('x-')) extensions.push({ name: key, value: any(v) });
    else if (type.fields[key]?.resolvedType === null) out[key] = v;
    else throw new Error(`openapi v2 protobuf: ${name} has no field for "${key}"`);
  }
  if (extensions.length > 0) out['vendorExtension'] = extensions;
  return out;
}

const schemaRules: Rules = {
  $ref: (v) => ({ _ref: v }),
  type: (v) => ({ type: { value: list(v) } }),
  items: (v) => ({ items: { schema: list(v).map(schema) } }),
  // A boolean or a schema: gnostic's oneof keeps which one it was.
  additionalProperties: (v) => ({
    additionalProperties: typeof v === 'boolean' ? { boolean: v } : { schema: schema(v) },
  }),
  properties: (v) => ({ properties: { additionalProperties: pairs(v, 'properties', schema) } }),
  allOf: (v) => ({ allOf: list(v).map(schema) }),
  enum: (v) => ({ enum: list(v).map(any) }),
  default: (v) => ({ default: any(v) }),
  example: (v) => ({ example: any(v) }),
};

function schema(value: unknown): Message {
  return message('Schema', value, schemaRules);
}

const nonBodyParameters: Readonly<Record<string, [string, MessageName]>> = {
  query: ['queryParameterSubSchema', 'QueryParameterSubSchema'],
  path: ['pathParameterSubSchema', 'PathParameterSubSchema'],
};

/** A parameter: a body, a query or path sub-schema, or a reference, as gnostic's oneofs nest them. */
function parameter(value: unknown): Message {
  const p = json(value, 'parameter');
  if (typeof p['$ref'] === 'string') return { jsonReference: { _ref: p['$ref'] } };
  if (p['in'] === 'body') {
    return {
      parameter: {
        bodyParameter: message('BodyParameter', p, { schema: (v) => ({ schema: schema(v) }) }),
      },
    };
  }
  const sub = nonBodyParameters[String(p['in'])];
  if (sub === undefined)
    throw new Error(`openapi v2 protobuf: no parameters in ${String(p['in'])}`);
  return { parameter: { nonBodyParameter: { [sub[0]]: message(sub[1], p) } } };
}

function response(value: unknown): Message {
  const r = json(value, 'response');
  if (typeof r['$ref'] === 'string') return { jsonReference: { _ref: r['$ref'] } };
  return {
    response: message('Response', r, { schema: (v) => ({ schema: { schema: schema(v) } }) }),
  };
}

/** A JSON map whose `x-` keys are vendor extensions beside its named entries (paths, responses). */
function namedAndExtensions(
  value: unknown,
  where: string,
  convert: (v: unknown) => Message,
): [Message[], Message[]] {
  const entries = Object.entries(json(value, where));
  return [
    entries
      .filter(([key]) => !key.startsWith('x-'))
      .map(([name, v]) => ({ name, value: convert(v) })),
    entries.filter(([key]) => key.startsWith('x-')).map(([name, v]) => ({ name, value: any(v) })),
  ];
}

function responses(value: unknown): Message {
  const [responseCode, vendorExtension] = namedAndExtensions(value, 'responses', response);
  return { responseCode, vendorExtension };
}

const parameters = (v: unknown): Message => ({ parameters: list(v).map(parameter) });

function operation(value: unknown): Message {
  return message('Operation', value, {
    parameters,
    responses: (v) => ({ responses: responses(v) }),
  });
}

const methods = ['get', 'put', 'post', 'delete', 'patch'] as const;
const pathItemRules: Rules = {
  parameters,
  ...Object.fromEntries(methods.map((m) => [m, (v: unknown) => ({ [m]: operation(v) })])),
};

function paths(value: unknown): Message {
  const pathItem = (v: unknown) => message('PathItem', v, pathItemRules);
  const [path, vendorExtension] = namedAndExtensions(value, 'paths', pathItem);
  return { path, vendorExtension };
}

/** Only API keys are described here (the bearer token); another scheme is refused. */
function securityScheme(value: unknown): Message {
  const s = json(value, 'security definition');
  if (s['type'] !== 'apiKey')
    throw new Error(`openapi v2 protobuf: no ${String(s['type'])} security`);
  return { apiKeySecurity: message('ApiKeySecurity', s) };
}

const documentRules: Rules = {
  info: (v) => ({ info: message('Info', v) }),
  paths: (v) => ({ paths: paths(v) }),
  definitions: (v) => ({ definitions: { additionalProperties: pairs(v, 'definitions', schema) } }),
  securityDefinitions: (v) => ({
    securityDefinitions: { additionalProperties: pairs(v, 'securityDefinitions', securityScheme) },
  }),
  security: (v) => ({
    security: list(v).map((requirement) => ({
      additionalProperties: pairs(requirement, 'security', (scopes) => ({ value: list(scopes) })),
    })),
  }),
};

// ---------------------------------------------------------------------------------------------
// Encoding and serving.

/**
 * The two spellings kube-openapi's handler accepts: kubectl before 1.27 sends the `@` one. The
 * answer is always labelled with the other, as kube-openapi does since 2023: Go's
 * mime.ParseMediaType refuses the `@`, and client-go 1.20 fails the whole request with
 * "mime: unexpected content after media subtype" when it reads it back in Content-Type.
 */
const protobufMediaTypes = [
  'application/com.github.proto-openapi.spec.v2@v1.0+protobuf',
  'application/com.github.proto-openapi.spec.v2.v1.0+protobuf',
];
const protobufContentType = 'application/com.github.proto-openapi.spec.v2.v1.0+protobuf';

/** The document's bytes: built once per JSON document, which openapi.ts builds once. */
const encoded = new WeakMap<object, Uint8Array>();

function encodeOpenApiV2(document: unknown): Uint8Array {
  const doc = json(document, 'the document');
  let bytes = encoded.get(doc);
  if (bytes === undefined) {
    const type = openApiV2DocumentType;
    bytes = type.encode(type.fromObject(message('Document', doc, documentRules))).finish();
    encoded.set(doc, bytes);
  }
  return bytes;
}

/** The v2 document as protobuf, ready to send. */
class OpenApiV2Protobuf {
  constructor(readonly bytes: Uint8Array) {}

  write(res: ServerResponse): void {
    res.writeHead(200, {
      'content-type': protobufContentType,
      'content-length': this.bytes.length,
      vary: 'Accept',
    });
    res.end(this.bytes);
  }
}

interface Ranked {
  mediaType: string;
  q: number;
  /** At equal q goautoneg ranks a concrete type first, then `application/*`, then the any-type. */
  specificity: number;
}

function ranked(part: string): Ranked {
  const [mediaType = '', ...params] = part.split(';').map((s) => s.trim().toLowerCase());
  const q = params.find((p) => p.startsWith('q='));
  const specificity = mediaType === '*/*' ? 0 : mediaType.endsWith('/*') ? 1 : 2;
  return { mediaType, q: q === undefined ? 1 : Number(q.slice(2)) || 0, specificity };
}

const servesJson = (mediaType: string) =>
  ['application/json', 'application/*', '*/*'].includes(mediaType);

/**
 * Whether the Accept header prefers protobuf to JSON, ranked as kube-openapi's handler ranks it
 * (goautoneg: q, then specificity, then order). Anything else gets JSON, as before.
 */
function prefersProtobuf(accept: string | undefined): boolean {
  const best = (accept ?? '')
    .split(',')
    .map(ranked)
    .filter((r) => r.q > 0 && (servesJson(r.mediaType) || protobufMediaTypes.includes(r.mediaType)))
    .sort((a, b) => b.q - a.q || b.specificity - a.specificity)[0];
  return best !== undefined && protobufMediaTypes.includes(best.mediaType);
}

/** `/openapi/v2` as protobuf when `accept` asks for it, else undefined (serve the JSON). */
function openApiV2Protobuf(
  accept: string | undefined,
  document: unknown,
): OpenApiV2Protobuf | undefined {
  return prefersProtobuf(accept) ? new OpenApiV2Protobuf(encodeOpenApiV2(document)) : undefined;
}

export {
  OpenApiV2Protobuf,
  encodeOpenApiV2,
  openApiV2DocumentType,
  openApiV2Protobuf,
  protobufContentType,
};
