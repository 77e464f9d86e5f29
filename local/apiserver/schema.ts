/**
 * What kube-apiserver does to a custom resource body with its CRD's openAPIV3Schema, so that the
 * development API server accepts and refuses exactly what a cluster would, with the same words.
 *
 * The steps follow the apiextensions-apiserver request pipeline, each ported from its source:
 * 1. decoding (`coerce`): prune unknown fields (pkg/apiserver/schema/pruning), drop non-nullable
 *    nulls that have no default (schema/defaulting/prunenulls.go), apply defaults
 *    (schema/defaulting/algorithm.go);
 * 2. validation (`validate`): kube-openapi's SchemaValidator (pkg/validation/validate) turned into
 *    field errors as apiextensions' kubeOpenAPIResultToFieldErrors does, then the embedded-resource
 *    checks (schema/objectmeta/validation.go);
 * 3. the answers: the 422 Invalid Status (apimachinery api/errors.NewInvalid), the strict decoding
 *    message and the Warning headers for unknown fields (apiserver endpoints/handlers).
 *
 * The strategy step between 1 and 2 (dropping status on create, keeping the stored status on
 * update) is the server's; `admit` runs 1 and 2 back to back for callers that need neither.
 *
 * Values come from JSON.parse, which cannot tell `1` from `1.0`; Go decodes the first as int64 and
 * the second as float64. Here an integral number below 2^63 stands for int64, any other for
 * float64 (see goKind). The root's metadata, apiVersion and kind are the server's: never pruned,
 * defaulted or validated here, whatever the schema says of them.
 *
 * Not done here: CEL rules (x-kubernetes-validations), list types, ratcheting of unchanged fields
 * on update, and the coercion and validation of an embedded resource's metadata.
 */
import { Buffer } from 'node:buffer';

/** The subset of a CRD's JSONSchemaProps that structural schemas allow and this module reads. */
interface StructuralSchema {
  type?: 'object' | 'array' | 'string' | 'integer' | 'number' | 'boolean';
  format?: string;
  description?: string;
  nullable?: boolean;
  default?: unknown;
  enum?: unknown[];
  properties?: Record<string, StructuralSchema>;
  required?: string[];
  additionalProperties?: StructuralSchema;
  items?: StructuralSchema;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: boolean;
  exclusiveMaximum?: boolean;
  multipleOf?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  minItems?: number;
  maxItems?: number;
  uniqueItems?: boolean;
  minProperties?: number;
  maxProperties?: number;
  allOf?: StructuralSchema[];
  anyOf?: StructuralSchema[];
  oneOf?: StructuralSchema[];
  not?: StructuralSchema;
  'x-kubernetes-preserve-unknown-fields'?: boolean;
  'x-kubernetes-int-or-string'?: boolean;
  'x-kubernetes-embedded-resource'?: boolean;
}

type FieldErrorType =
  | 'FieldValueRequired'
  | 'FieldValueInvalid'
  | 'FieldValueTypeInvalid'
  | 'FieldValueNotSupported'
  | 'FieldValueTooLong'
  | 'FieldValueTooMany';

/** k8s.io/apimachinery/pkg/util/validation/field.Error. */
interface FieldError {
  type: FieldErrorType;
  /** The path as kube prints it: `spec.a.b`, `spec.x[2].y`, `spec.map.key`; `<nil>` for none. */
  field: string;
  badValue: unknown;
  detail: string;
}

interface Coerced {
  /** The body after pruning and defaulting (a copy: the input is not changed). */
  object: Record<string, unknown>;
  /** Paths of the pruned fields, sorted as kube sorts them (`spec.foo`, `spec.x[0].bar`). */
  unknownFields: string[];
}

interface AdmitResult extends Coerced {
  errors: FieldError[];
}

interface ValidateOptions {
  /**
   * 'status' validates only `status`, against the status schema, as an update of the /status
   * subresource is validated: field paths keep the `status.` prefix, messages do not.
   */
  subresource?: 'status';
}

/** The 422 Status kube answers an invalid object with (metav1.Status, omitempty fields left out). */
/** What the server's 422 Invalid Status says: the message and the details with their causes. */
interface InvalidStatus {
  message: string;
  details: {
    name?: string;
    group?: string;
    kind: string;
    causes?: Array<{ reason: FieldErrorType; message?: string; field?: string }>;
  };
}

type JsonObject = Record<string, unknown>;

const metaFields: ReadonlySet<string> = new Set(['apiVersion', 'kind', 'metadata']);
const preserveUnknown = 'x-kubernetes-preserve-unknown-fields';
const embeddedResource = 'x-kubernetes-embedded-resource';

// ---------------------------------------------------------------------------------------------
// JSON and Go value helpers

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Own keys only: a body key named `constructor` must not find Object.prototype's. */
function own<T>(map: Record<string, T> | undefined, key: string): T | undefined {
  return map !== undefined && Object.hasOwn(map, key) ? map[key] : undefined;
}

/** Assignment that makes a key named `__proto__` a property, as Go's map would, not a prototype. */
function setOwn(object: JsonObject, key: string, value: unknown): void {
  Object.defineProperty(object, key, {
    value,
    writable: true,
    enumerable: true,
    configurable: true,
  });
}

/** The Go type encoding/json (as sigs.k8s.io/json with preserveInts) would give the value. */
type GoKind = 'nil' | 'bool' | 'string' | 'int64' | 'float64' | 'slice' | 'map';

function isGoInt(n: number): boolean {
  return Number.isInteger(n) && n >= -(2 ** 63) && n < 2 ** 63;
}

function goKind(value: unknown): GoKind {
  if (value === null || value === undefined) return 'nil';
  if (typeof value === 'boolean') return 'bool';
  if (typeof value === 'string') return 'string';
  if (typeof value === 'number') return isGoInt(value) ? 'int64' : 'float64';
  return Array.isArray(value) ? 'slice' : 'map';
}

/** Go's fmt %v of a float64: shortest digits, exponent form outside [1e-4, 1e6). */
function goFloat(n: number): string {
  if (n === 0) return Object.is(n, -0) ? '-0' : '0';
  const [mantissa, exponent] = n.toExponential().split('e') as [string, string];
  const exp = Number(exponent);
  if (exp >= -4 && exp < 6) return String(n);
  const digits = String(Math.abs(exp)).padStart(2, '0');
  return `${mantissa}e${exp < 0 ? '-' : '+'}${digits}`;
}

/** %v of a number held as the Go kind goKind gives it. */
function goNumber(n: number): string {
  return isGoInt(n) ? goInt(n) : goFloat(n);
}

/** %v of an integral number, without the exponent JavaScript prints from 1e21. */
function goInt(n: number): string {
  return BigInt(Math.trunc(n)).toString();
}

/** Go's strconv.Quote (what %q prints). */
function goQuote(text: string): string {
  const named: Record<number, string> = {
    7: 'a',
    8: 'b',
    9: 't',
    10: 'n',
    11: 'v',
    12: 'f',
    13: 'r',
  };
  let out = '"';
  for (const ch of text) {
    const cp = ch.codePointAt(0)!;
    if (ch === '"' || ch === '\\') out += `\\${ch}`;
    else if (cp >= 0x20 && cp < 0x7f) out += ch;
    else if (named[cp] !== undefined) out += `\\${named[cp]}`;
    else if (cp < 0x80) out += `\\x${cp.toString(16).padStart(2, '0')}`;
    else if (!/[\p{C}\p{Z}]/u.test(ch)) out += ch;
    else if (cp < 0x10000) out += `\\u${cp.toString(16).padStart(4, '0')}`;
    else out += `\\U${cp.toString(16).padStart(8, '0')}`;
  }
  return `${out}"`;
}

/** Go's json.Marshal of a decoded JSON value: sorted keys, HTML characters escaped. */
function goJson(value: unknown): string {
  const sorted = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(sorted);
    if (!isObject(v)) return v;
    const out: JsonObject = {};
    for (const key of Object.keys(v).sort(compareGoStrings)) setOwn(out, key, sorted(v[key]));
    return out;
  };
  return JSON.stringify(sorted(value) ?? null).replace(
    /[<>&\u2028\u2029]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

/** Go compares strings bytewise (UTF-8), which is code point order, not UTF-16 order. */
function compareGoStrings(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

function runeCount(text: string): number {
  let n = 0;
  for (const _ of text) n++;
  return n;
}

/** reflect.DeepEqual on decoded JSON. */
function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b))
    return a.length === b.length && a.every((v, i) => jsonEqual(v, b[i]));
  if (!isObject(a) || !isObject(b)) return false;
  const keys = Object.keys(a);
  return (
    keys.length === Object.keys(b).length &&
    keys.every((k) => Object.hasOwn(b, k) && jsonEqual(a[k], b[k]))
  );
}

/** go-openapi/swag IsFloat64AJSONInteger (v0.27): integral within 1e-9 relative, below 2^53. */
function isJsonInteger(f: number): boolean {
  const max = 2 ** 53 - 1;
  if (!Number.isFinite(f) || f < -max || f > max) return false;
  const rounded = Math.round(f);
  if (f === rounded) return true;
  if (rounded === 0) return false;
  return Math.abs(f - rounded) < 1e-9 * Math.abs(rounded);
}

// ---------------------------------------------------------------------------------------------
// Decoding: pruning, null pruning, defaulting

/** The root as kube treats it: never prune, default or validate apiVersion, kind or metadata. */
function rootView(schema: StructuralSchema): StructuralSchema {
  if (schema.properties === undefined) return schema;
  const properties = Object.fromEntries(
    Object.entries(schema.properties).filter(([key]) => !metaFields.has(key)),
  );
  return { ...schema, properties };
}

function appendKey(path: string, key: string): string {
  return path === '' ? key : `${path}.${key}`;
}

/** pruning.prune: drop what the schema does not specify, recording each dropped path. */
function prune(x: unknown, s: StructuralSchema | undefined, path: string, found?: string[]): void {
  if (s?.[preserveUnknown] === true) return skipPrune(x, s, path, found);
  if (Array.isArray(x)) {
    x.forEach((v, i) => prune(v, s?.items, `${path}[${i}]`, found));
    return;
  }
  if (!isObject(x)) return;
  for (const key of Object.keys(x)) {
    if (s?.[embeddedResource] === true && metaFields.has(key)) continue;
    const child = own(s?.properties, key) ?? s?.additionalProperties;
    if (s !== undefined && child !== undefined) {
      prune(x[key], child, appendKey(path, key), found);
    } else {
      found?.push(appendKey(path, key));
      delete x[key];
    }
  }
}

/** pruning.skipPrune: under x-kubernetes-preserve-unknown-fields keep unknown keys. */
function skipPrune(x: unknown, s: StructuralSchema | undefined, path: string, found?: string[]) {
  if (s === undefined) return;
  if (Array.isArray(x)) {
    // As kube does: the items of a preserving array are themselves skip-pruned.
    x.forEach((v, i) => skipPrune(v, s.items, `${path}[${i}]`, found));
    return;
  }
  if (!isObject(x)) return;
  for (const key of Object.keys(x)) {
    if (s[embeddedResource] === true && metaFields.has(key)) continue;
    const child = own(s.properties, key) ?? s.additionalProperties;
    if (child !== undefined) prune(x[key], child, appendKey(path, key), found);
  }
}

function hasDefault(s: StructuralSchema): boolean {
  // A default of null is Go's nil: no default at all.
  return s.default !== undefined && s.default !== null;
}

function fieldSchema(s: StructuralSchema | undefined, key: string): StructuralSchema | undefined {
  return own(s?.properties, key) ?? s?.additionalProperties;
}

/** defaulting.PruneNonNullableNullsWithoutDefaults: such nulls go before defaulting. */
function pruneNulls(x: unknown, s: StructuralSchema | undefined): void {
  if (Array.isArray(x)) {
    for (const v of x) pruneNulls(v, s?.items);
    return;
  }
  if (!isObject(x)) return;
  for (const key of Object.keys(x)) {
    const child = fieldSchema(s, key);
    if (x[key] === null && child !== undefined && child.nullable !== true && !hasDefault(child))
      delete x[key];
    else pruneNulls(x[key], child);
  }
}

function isNonNullableNull(x: unknown, s: StructuralSchema | undefined): boolean {
  return x === null && s !== undefined && s.nullable !== true;
}

/** A default as kube stores it: pruned against its own schema when the CRD is read. */
function defaultValue(s: StructuralSchema): unknown {
  const value = structuredClone(s.default ?? null);
  prune(value, s, '');
  return value;
}

/** defaulting.Default: fill absent (or non-nullable null) fields, then recurse. */
function applyDefaults(x: unknown, s: StructuralSchema | undefined): void {
  if (s === undefined) return;
  if (Array.isArray(x)) {
    const items = s.items;
    if (items === undefined) return;
    x.forEach((v, i) => {
      if (isNonNullableNull(v, items) && hasDefault(items)) x[i] = defaultValue(items);
      applyDefaults(x[i], items);
    });
    return;
  }
  if (!isObject(x)) return;
  for (const [key, property] of Object.entries(s.properties ?? {})) {
    if (!hasDefault(property)) continue;
    if (!Object.hasOwn(x, key) || isNonNullableNull(x[key], property))
      setOwn(x, key, defaultValue(property));
  }
  for (const key of Object.keys(x)) {
    const property = own(s.properties, key);
    const additional = s.additionalProperties;
    if (property !== undefined) applyDefaults(x[key], property);
    else if (additional !== undefined) {
      if (isNonNullableNull(x[key], additional) && hasDefault(additional))
        x[key] = defaultValue(additional);
      applyDefaults(x[key], additional);
    }
  }
}

/**
 * What kube's decoder does to a request body: prune the fields the schema does not specify
 * (their paths, for fieldValidation), drop non-nullable nulls without a default, apply defaults.
 */
function coerce(schema: StructuralSchema, body: Record<string, unknown>): Coerced {
  const object = structuredClone(body);
  const view = rootView(schema);
  const found: string[] = [];
  // PruneWithOptions marks the root an embedded resource: its apiVersion, kind, metadata stay.
  prune(object, { ...view, [embeddedResource]: true }, '', found);
  pruneNulls(object, view);
  applyDefaults(object, view);
  return { object, unknownFields: found.sort(compareGoStrings) };
}

// ---------------------------------------------------------------------------------------------
// Validation: kube-openapi's SchemaValidator

/**
 * An error as kube-openapi reports it. `name` is the path it validated (`spec.a`, or `.spec` for
 * a required root field); `value` undefined stands for Go's nil. Plain errors (errors.New or
 * fmt.Errorf in kube-openapi) carry no code and become `<nil>` field errors.
 */
interface OpenApiError {
  code?: 'type' | 'required' | 'tooLong' | 'enum' | 'maxItems' | 'tooManyProperties' | 'invalid';
  name?: string;
  message: string;
  value?: unknown;
  valid?: number;
  values?: unknown[];
}

/** validate.Result: errors kept unique by message, and the match count anyOf/oneOf rank by. */
class Result {
  readonly errors: OpenApiError[] = [];
  private readonly messages = new Set<string>();
  matchCount = 0;

  add(...errors: Array<OpenApiError | undefined>): this {
    for (const error of errors) {
      if (error === undefined || this.messages.has(error.message)) continue;
      this.messages.add(error.message);
      this.errors.push(error);
    }
    return this;
  }

  merge(...others: Array<Result | undefined>): this {
    for (const other of others) {
      if (other === undefined) continue;
      this.add(...other.errors);
      this.matchCount += other.matchCount;
    }
    return this;
  }

  get valid(): boolean {
    return this.errors.length === 0;
  }
}

const failed = (error: OpenApiError): Result => new Result().add(error);

/** A passed check that counts as one match (typeValidator increments before returning). */
function matched(): Result {
  const result = new Result();
  result.matchCount = 1;
  return result;
}
const inBody = (path: string): string => `${path} in body`;

/** The OpenAPI types a schema allows: x-kubernetes-int-or-string stands for integer,string. */
function typesOf(s: StructuralSchema): string[] {
  if (s['x-kubernetes-int-or-string'] === true) return ['integer', 'string'];
  return s.type === undefined ? [] : [s.type];
}

// Formats kube keeps on string schemas (apiextensions validation/formats.go), dashes removed as
// go-openapi normalizes names; only datetime, date and byte are checked here.
const stringFormats: ReadonlySet<string> = new Set(
  (
    'bsonobjectid uri email hostname ipv4 ipv6 cidr mac uuid uuid3 uuid4 uuid5 isbn isbn10 ' +
    'isbn13 creditcard ssn hexcolor rgbcolor byte password date duration datetime ' +
    'k8sshortname k8slongname'
  ).split(' '),
);

/** validation.StripUnsupportedFormatsPostProcessor: the format kube keeps, else ''. */
function formatOf(s: StructuralSchema): string {
  const format = s.format ?? '';
  const types = typesOf(s);
  const type = types.length === 1 ? types[0] : '';
  if (format === '') return '';
  if (type === '' || type === 'string')
    return stringFormats.has(format.replaceAll('-', '')) ? format : '';
  if (type === 'integer') return format === 'int32' || format === 'int64' ? format : '';
  if (type === 'number') return format === 'float' || format === 'double' ? format : '';
  return '';
}

function schemaInfo(kind: GoKind): [string, string] {
  switch (kind) {
    case 'bool':
      return ['boolean', ''];
    case 'string':
      return ['string', ''];
    case 'int64':
      return ['integer', 'int64'];
    case 'float64':
      return ['number', 'float64'];
    case 'slice':
      return ['array', ''];
    default:
      return ['object', ''];
  }
}

function typeError(path: string, typeName: string, value: string): OpenApiError {
  const message = `${inBody(path)} must be of type ${typeName}: ${goQuote(value)}`;
  return { code: 'type', name: path, message, value };
}

/** A null passes the type check only where the schema has no type or is nullable. */
function checkNullType(types: readonly string[], s: StructuralSchema, path: string): Result {
  if (types.length > 0 && s.nullable !== true)
    return failed(typeError(path, types.join(','), 'null'));
  return matched();
}

/** The numbers typeValidator lets through for the other numeric type: integral floats, ints. */
function isNumberCoercion(value: unknown, schType: string, types: readonly string[]): boolean {
  const isFloatInt =
    schType === 'number' && isJsonInteger(value as number) && types.includes('integer');
  const isIntFloat = schType === 'integer' && types.includes('number');
  return isFloatInt || isIntFloat;
}

/** validate.typeValidator, with its format quirks (an array passes a string field with a format). */
function checkType(value: unknown, s: StructuralSchema, path: string): Result {
  const types = typesOf(s);
  const format = formatOf(s);
  if (value === null) return checkNullType(types, s, path);
  const kind = goKind(value);
  const [schType, dataFormat] = schemaInfo(kind);
  const numeric = types.includes('number') || types.includes('integer');
  const typeMatches = types.includes(schType) || isNumberCoercion(value, schType, types);
  const stringLike = kind === 'string' || kind === 'slice';
  const formatMatches =
    typeMatches || dataFormat === format || (format === 'int64' && dataFormat === 'int32');
  if (!stringLike && format !== '' && !formatMatches)
    return failed(typeError(path, format, dataFormat));
  if (!numeric && format !== '' && stringLike) return matched();
  if (!typeMatches) return failed(typeError(path, types.join(','), schType));
  return matched();
}

function invalid(path: string, message: string, value?: unknown): OpenApiError {
  return { code: 'invalid', name: path, message, value };
}

/** validate.stringValidator: the first of maxLength, minLength, pattern that fails. */
function checkString(value: string, s: StructuralSchema, path: string): OpenApiError | undefined {
  const length = runeCount(value);
  if (s.maxLength !== undefined && length > s.maxLength) {
    const message = `${inBody(path)} should be at most ${s.maxLength} chars long`;
    return { code: 'tooLong', name: path, message, value, valid: s.maxLength };
  }
  if (s.minLength !== undefined && length < s.minLength)
    return invalid(path, `${inBody(path)} should be at least ${s.minLength} chars long`, value);
  if (s.pattern !== undefined && s.pattern !== '') {
    const pattern = compilePattern(s.pattern);
    if (typeof pattern === 'string')
      return invalid(
        path,
        `${inBody(path)} should match '${s.pattern}, but pattern is invalid: ${pattern}'`,
        value,
      );
    if (!pattern.test(value))
      return invalid(path, `${inBody(path)} should match '${s.pattern}'`, value);
  }
  return undefined;
}

const patterns = new Map<string, RegExp | string>();

/** Go compiles patterns as RE2; JavaScript's unicode mode is the closest, plain mode the fallback. */
function compilePattern(source: string): RegExp | string {
  let compiled = patterns.get(source);
  if (compiled === undefined) {
    try {
      compiled = new RegExp(source, 'u');
    } catch {
      try {
        compiled = new RegExp(source);
      } catch (err) {
        compiled = err instanceof Error ? err.message : String(err);
      }
    }
    patterns.set(source, compiled);
  }
  return compiled;
}

/** strfmt's date (time.Parse "2006-01-02": real calendar days). */
function isDate(text: string): boolean {
  const match = /^(\d{4})-(\d{2})-(\d{2})$/.exec(text);
  if (match === null) return false;
  const [year, month, day] = [Number(match[1]), Number(match[2]), Number(match[3])];
  if (month < 1 || month > 12 || day < 1) return false;
  return day <= new Date(Date.UTC(year, month, 0)).getUTCDate();
}

/** strfmt.IsDateTime, step by step. */
function isDateTime(text: string): boolean {
  if (text.length < 4) return false;
  const parts = text.toLowerCase().split('t');
  if (parts.length < 2 || !isDate(parts[0]!)) return false;
  const m = /^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$/.exec(
    parts[1]!,
  );
  return m !== null && m[1]! <= '23' && m[2]! <= '59' && m[3]! <= '59';
}

const formatCheckers: Record<string, (text: string) => boolean> = {
  datetime: isDateTime,
  date: isDate,
  byte: (text) =>
    /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$/.test(text),
};

/** validate.formatValidator; formats kube knows but not checked here (uri, uuid…) pass. */
function checkFormat(value: string, format: string, path: string): OpenApiError | undefined {
  const check = formatCheckers[format.replaceAll('-', '')];
  if (check === undefined || check(value)) return undefined;
  return typeError(path, format, value);
}

interface NumberType {
  typeName: string;
  format: string;
}

/** SchemaValidator.numberValidator: the type and format only when the schema has one type. */
function numberTypeOf(s: StructuralSchema): NumberType {
  const types = typesOf(s);
  const format = formatOf(s);
  if (types.length !== 1) return { typeName: '', format: '' };
  if (types[0] === 'integer')
    return { typeName: 'integer', format: format === 'int32' || format === 'int64' ? format : '' };
  if (types[0] === 'number')
    return { typeName: 'number', format: format === 'float' || format === 'double' ? format : '' };
  return { typeName: '', format: '' };
}

/** validate.IsValueValidAgainstRange: can the number be held by the type and format? */
function rangeError(
  n: number,
  t: NumberType,
  prefix: string,
  path: string,
): OpenApiError | undefined {
  let fits = true;
  if (t.typeName === 'integer') {
    // Go prints the number without exponent and parses it back as an int32 or int64.
    const int32 = Number.isInteger(n) && n >= -(2 ** 31) && n <= 2 ** 31 - 1;
    fits = t.format === 'int32' ? int32 : isGoInt(n);
  } else if (t.format === 'float') {
    fits = Number.isFinite(Math.fround(n));
  }
  if (fits) return undefined;
  const what =
    t.format !== '' ? `${t.typeName} with format ${t.format}` : `${t.typeName} (default format)`;
  return { message: `${prefix} value must be of type ${what} in ${path}` };
}

function multipleOfError(
  n: number,
  factor: number,
  path: string,
  native: boolean,
): OpenApiError | undefined {
  // An int64 value is checked against the factor truncated to int64, a float64 one as a float.
  const asInt = native && isGoInt(n);
  const f = asInt ? Math.trunc(factor) : factor;
  if (f <= 0) {
    const message = `factor MultipleOf declared for ${path} must be positive: ${asInt ? goInt(f) : goFloat(f)}`;
    return invalid(path, message, f);
  }
  const whole = asInt ? n % f === 0 : isJsonInteger(f < 1 ? (1 / f) * n : n / f);
  if (whole) return undefined;
  return invalid(
    path,
    `${inBody(path)} should be a multiple of ${asInt ? goInt(f) : goFloat(f)}`,
    n,
  );
}

function boundError(
  n: number,
  bound: number,
  exclusive: boolean,
  side: 'maximum' | 'minimum',
  path: string,
  native: boolean,
): OpenApiError | undefined {
  // MaximumNativeType compares an int64 value with the bound truncated to int64.
  const asInt = native && isGoInt(n);
  const b = asInt ? Math.trunc(bound) : bound;
  const over = side === 'maximum' ? (exclusive ? n >= b : n > b) : exclusive ? n <= b : n < b;
  if (!over) return undefined;
  const relation =
    side === 'maximum'
      ? exclusive
        ? 'less than'
        : 'less than or equal to'
      : exclusive
        ? 'greater than'
        : 'greater than or equal to';
  return invalid(path, `${inBody(path)} should be ${relation} ${asInt ? goInt(b) : goFloat(b)}`, n);
}

/** validate.numberValidator: range of the type, then multipleOf, minimum, maximum. */
function checkNumber(n: number, s: StructuralSchema, path: string): Result {
  const t = numberTypeOf(s);
  const res = new Result().add(rangeError(n, t, 'Checked', path));
  const constraint = (
    bound: number | undefined,
    prefix: string,
    check: (native: boolean) => OpenApiError | undefined,
  ) => {
    if (bound === undefined) return undefined;
    // A bound the type cannot hold is reported, and the value compared with it as a float64.
    const unfit = rangeError(bound, t, prefix, path);
    return new Result().add(unfit, check(unfit === undefined));
  };
  const multiple = constraint(s.multipleOf, 'MultipleOf', (native) =>
    multipleOfError(n, s.multipleOf!, path, native),
  );
  const minimum = constraint(s.minimum, 'Minimum boundary', (native) =>
    boundError(n, s.minimum!, s.exclusiveMinimum === true, 'minimum', path, native),
  );
  const maximum = constraint(s.maximum, 'Maximum boundary', (native) =>
    boundError(n, s.maximum!, s.exclusiveMaximum === true, 'maximum', path, native),
  );
  res.merge(multiple, minimum, maximum);
  res.matchCount++;
  return res;
}

/** validate.schemaSliceValidator: items, then minItems, maxItems, uniqueItems. */
function checkSlice(x: unknown[], s: StructuralSchema, path: string): Result {
  const res = new Result();
  const items = s.items;
  if (items !== undefined) x.forEach((v, i) => res.merge(validateNode(v, items, `${path}[${i}]`)));
  if (s.minItems !== undefined && x.length < s.minItems)
    res.add(invalid(path, `${inBody(path)} should have at least ${s.minItems} items`, x.length));
  if (s.maxItems !== undefined && x.length > s.maxItems) {
    const message = `${inBody(path)} should have at most ${s.maxItems} items`;
    res.add({ code: 'maxItems', name: path, message, value: x.length, valid: s.maxItems });
  }
  if (s.uniqueItems === true && x.some((v, i) => x.slice(0, i).some((u) => jsonEqual(u, v))))
    res.add(invalid(path, `${inBody(path)} shouldn't contain duplicates`));
  res.matchCount++;
  return res;
}

/** basicCommonValidator's match: the value converted to the enum value's Go type, then compared. */
function enumMatches(value: unknown, option: unknown): boolean {
  const kind = goKind(value);
  switch (goKind(option)) {
    case 'string':
      // Go converts an integer to the string of its code point.
      return kind === 'string'
        ? value === option
        : kind === 'int64' && codePointString(value as number) === option;
    case 'int64':
      return (kind === 'int64' || kind === 'float64') && Math.trunc(value as number) === option;
    case 'float64':
      return (kind === 'int64' || kind === 'float64') && value === option;
    case 'bool':
      return value === option;
    case 'slice':
    case 'map':
      return goKind(value) === goKind(option) && jsonEqual(value, option);
    default:
      return false; // a nil enum value, or a nil value: never a match
  }
}

function codePointString(n: number): string {
  const valid = n >= 0 && n <= 0x10ffff && (n < 0xd800 || n > 0xdfff);
  return valid ? String.fromCodePoint(n) : '\ufffd';
}

function checkEnum(value: unknown, s: StructuralSchema, path: string): OpenApiError | undefined {
  const options = s.enum ?? [];
  if (options.length === 0 || options.some((option) => enumMatches(value, option)))
    return undefined;
  // The message only keeps errors unique; the field error prints the values its own way.
  const listed = options.map((o) => (typeof o === 'string' ? o : goJson(o))).join(' ');
  return {
    code: 'enum',
    name: path,
    message: `${inBody(path)} should be one of [${listed}]`,
    value,
    values: options,
  };
}

/** validate.objectValidator: property counts, additionalProperties, properties, required. */
function checkObject(x: JsonObject, s: StructuralSchema, path: string): Result {
  const res = new Result();
  const count = Object.keys(x).length;
  if (s.minProperties !== undefined && count < s.minProperties)
    res.add(
      invalid(path, `${inBody(path)} should have at least ${s.minProperties} properties`, count),
    );
  if (s.maxProperties !== undefined && count > s.maxProperties) {
    const message = `${inBody(path)} should have at most ${s.maxProperties} properties`;
    res.add({
      code: 'tooManyProperties',
      name: path,
      message,
      value: count,
      valid: s.maxProperties,
    });
  }
  const additional = s.additionalProperties;
  if (additional !== undefined) {
    for (const key of Object.keys(x)) {
      if (own(s.properties, key) === undefined)
        res.merge(validateNode(x[key], additional, `${path}.${key}`));
    }
  }
  // kube walks properties in Go's random map order; the schema's order is a stable stand-in.
  for (const [name, property] of Object.entries(s.properties ?? {})) {
    if (Object.hasOwn(x, name)) res.merge(validateNode(x[name], property, appendKey(path, name)));
  }
  for (const name of s.required ?? []) {
    if (!Object.hasOwn(x, name))
      res.add({
        code: 'required',
        name: `${path}.${name}`,
        message: `${inBody(`${path}.${name}`)} is required`,
      });
  }
  return res;
}

/** The failure with the most matches, the first among equals: the one anyOf/oneOf report. */
function bestFailure(results: Result[]): Result | undefined {
  let best: Result | undefined;
  for (const result of results) {
    if (!result.valid && (best === undefined || result.matchCount > best.matchCount)) best = result;
  }
  return best;
}

function checkAnyOf(value: unknown, branches: StructuralSchema[], path: string): Result {
  const tried: Result[] = [];
  for (const branch of branches) {
    const result = validateNode(value, branch, path);
    if (result.valid) return result; // the first success stops the search
    tried.push(result);
  }
  return new Result()
    .add({ message: `${goQuote(path)} must validate at least one schema (anyOf)` })
    .merge(bestFailure(tried));
}

function checkOneOf(value: unknown, branches: StructuralSchema[], path: string): Result {
  const results = branches.map((branch) => validateNode(value, branch, path));
  const valid = results.filter((r) => r.valid);
  if (valid.length === 1) return valid[0]!;
  const found =
    valid.length === 0 ? 'Found none valid' : `Found ${valid.length} valid alternatives`;
  const res = new Result().add({
    message: `${goQuote(path)} must validate one and only one schema (oneOf). ${found}`,
  });
  // Once a branch is valid kube forgets the failures: they explain nothing.
  return valid.length === 0 ? res.merge(bestFailure(results)) : res;
}

function checkAllOf(value: unknown, branches: StructuralSchema[], path: string): Result {
  const results = branches.map((branch) => validateNode(value, branch, path));
  const res = new Result().merge(...results);
  const validated = results.filter((r) => r.valid).length;
  if (validated === results.length) return res;
  const none = validated === 0 ? '. None validated' : '';
  return res.add({ message: `${goQuote(path)} must validate all the schemas (allOf)${none}` });
}

/**
 * validate.schemaPropsValidator: anyOf, oneOf, allOf, not, each validated at the same path. Their
 * own messages are plain errors, which kube reports against the `<nil>` field.
 */
function checkCombinators(value: unknown, s: StructuralSchema, path: string): Result {
  const res = new Result();
  if (s.anyOf !== undefined && s.anyOf.length > 0) res.merge(checkAnyOf(value, s.anyOf, path));
  if (s.oneOf !== undefined && s.oneOf.length > 0) res.merge(checkOneOf(value, s.oneOf, path));
  if (s.allOf !== undefined && s.allOf.length > 0) res.merge(checkAllOf(value, s.allOf, path));
  if (s.not !== undefined && validateNode(value, s.not, path).valid)
    res.add({ message: `${goQuote(path)} must not validate the schema (not)` });
  res.matchCount++;
  return res;
}

/** SchemaValidator.Validate: every validator that applies to the value's kind, in kube's order. */
function validateNode(value: unknown, s: StructuralSchema, path: string): Result {
  const res = new Result();
  if (value === null || value === undefined) {
    // A null only meets the type and enum validators.
    return res.merge(checkType(null, s, path)).add(checkEnum(null, s, path));
  }
  const kind = goKind(value);
  const step = (result: Result | OpenApiError | undefined) => {
    if (result instanceof Result) res.merge(result);
    else res.add(result);
    res.matchCount++;
  };
  const format = formatOf(s);
  if (typesOf(s).length > 0 || format !== '') step(checkType(value, s, path));
  step(checkCombinators(value, s, path));
  if (kind === 'string') step(checkString(value as string, s, path));
  if (kind === 'string' && stringFormats.has(format.replaceAll('-', '')))
    step(checkFormat(value as string, format, path));
  if (kind === 'int64' || kind === 'float64') step(checkNumber(value as number, s, path));
  if (kind === 'slice') step(checkSlice(value as unknown[], s, path));
  step(checkEnum(value, s, path));
  if (kind === 'map') step(checkObject(value as JsonObject, s, path));
  res.matchCount++;
  return res;
}

// ---------------------------------------------------------------------------------------------
// Field errors

/** A field error from an OpenAPI error with a code, at its field. */
type CodedFieldError = (error: OpenApiError, field: string) => FieldError;

function requiredFieldError(_error: OpenApiError, field: string): FieldError {
  return { type: 'FieldValueRequired', field, badValue: '', detail: '' };
}

function enumFieldError(error: OpenApiError, field: string): FieldError {
  const values = (error.values ?? []).map((v) => (typeof v === 'string' ? v : goJson(v)));
  const detail = values.length > 0 ? `supported values: ${values.map(goQuote).join(', ')}` : '';
  return { type: 'FieldValueNotSupported', field, badValue: error.value ?? null, detail };
}

function tooLongFieldError(error: OpenApiError, field: string): FieldError {
  const max = error.valid ?? -1;
  const detail =
    max >= 0 ? `may not be more than ${max} ${max === 1 ? 'byte' : 'bytes'}` : 'value is too long';
  return { type: 'FieldValueTooLong', field, badValue: '<value omitted>', detail };
}

function tooManyFieldError(error: OpenApiError, field: string): FieldError {
  const max = error.valid ?? -1;
  const detail =
    max >= 0 ? `must have at most ${max} ${max === 1 ? 'item' : 'items'}` : 'has too many items';
  return { type: 'FieldValueTooMany', field, badValue: error.value, detail };
}

function typeFieldError(error: OpenApiError, field: string): FieldError {
  return {
    type: 'FieldValueTypeInvalid',
    field,
    badValue: error.value ?? '',
    detail: error.message,
  };
}

function invalidFieldError(error: OpenApiError, field: string): FieldError {
  return { type: 'FieldValueInvalid', field, badValue: error.value ?? '', detail: error.message };
}

/** The codes kube turns into their own field error types; any other is FieldValueInvalid. */
const fieldErrorsByCode = new Map<NonNullable<OpenApiError['code']>, CodedFieldError>([
  ['required', requiredFieldError],
  ['enum', enumFieldError],
  ['tooLong', tooLongFieldError],
  ['maxItems', tooManyFieldError],
  ['tooManyProperties', tooManyFieldError],
  ['type', typeFieldError],
]);

/** apiextensions validation.kubeOpenAPIResultToFieldErrors. */
function toFieldError(error: OpenApiError, parent: string | undefined): FieldError {
  const nil = parent ?? '<nil>';
  if (error.code === undefined)
    return { type: 'FieldValueInvalid', field: nil, badValue: '', detail: error.message };
  const name = error.name ?? '';
  const field =
    name === '' || name === '.' ? nil : appendKey(parent ?? '', name.replace(/^\./, ''));
  return (fieldErrorsByCode.get(error.code) ?? invalidFieldError)(error, field);
}

// ---------------------------------------------------------------------------------------------
// Embedded resources (objectmeta.Validate): apiVersion and kind

/** field.Path rendering: a child after a dot, a map key or an index in brackets. */
const child = (path: string | undefined, name: string) =>
  path === undefined ? name : `${path}.${name}`;
const subscript = (path: string | undefined, key: string | number) => `${path ?? ''}[${key}]`;

function dns1035Errors(value: string): string[] {
  const errors: string[] = [];
  if (Buffer.byteLength(value) > 63) errors.push('must be no more than 63 characters');
  if (!/^[a-z]([-a-z0-9]*[a-z0-9])?$/.test(value))
    errors.push(
      "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an " +
        "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or " +
        "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
    );
  return errors;
}

function typeMetaErrors(x: JsonObject, path: string | undefined): FieldError[] {
  const errors: FieldError[] = [];
  const fail = (field: string, badValue: unknown, detail: string) =>
    errors.push({ type: 'FieldValueInvalid', field, badValue, detail });
  for (const key of ['apiVersion', 'kind']) {
    if (!Object.hasOwn(x, key))
      errors.push({
        type: 'FieldValueRequired',
        field: child(path, key),
        badValue: '',
        detail: '',
      });
  }
  for (const key of ['apiVersion', 'kind']) {
    if (!Object.hasOwn(x, key)) continue;
    const value = x[key];
    const field = child(path, key);
    if (typeof value !== 'string') fail(field, value, 'must be a string');
    else if (value === '') fail(field, value, 'must not be empty');
    else if (key === 'apiVersion' && value.split('/').length > 2)
      fail(field, value, `unexpected GroupVersion string: ${value}`);
    else if (key === 'kind') {
      const problems = dns1035Errors(value.toLowerCase());
      if (problems.length > 0)
        fail(
          field,
          value,
          `may have mixed case, but should otherwise match: ${problems.join(',')}`,
        );
    }
  }
  return errors;
}

/** objectmeta.validate: embedded resources need apiVersion and kind (their metadata is not checked here). */
function embeddedErrors(
  x: unknown,
  s: StructuralSchema | undefined,
  path: string | undefined,
): FieldError[] {
  if (s === undefined) return [];
  if (Array.isArray(x)) return x.flatMap((v, i) => embeddedErrors(v, s.items, subscript(path, i)));
  if (!isObject(x)) return [];
  const errors = s[embeddedResource] === true ? typeMetaErrors(x, path) : [];
  for (const key of Object.keys(x)) {
    const property = own(s.properties, key);
    if (property !== undefined) errors.push(...embeddedErrors(x[key], property, child(path, key)));
    else if (s.additionalProperties !== undefined)
      errors.push(...embeddedErrors(x[key], s.additionalProperties, subscript(path, key)));
  }
  return errors;
}

/**
 * kube's validation of a decoded (coerced) object, as field errors in kube's order: the schema's
 * errors (each node before its children), then the embedded resources'.
 */
function validate(
  schema: StructuralSchema,
  object: Record<string, unknown>,
  options: ValidateOptions = {},
): FieldError[] {
  if (options.subresource === 'status') {
    const statusSchema = own(schema.properties, 'status');
    if (!Object.hasOwn(object, 'status') || statusSchema === undefined) return [];
    return validateNode(object['status'], statusSchema, '').errors.map((e) =>
      toFieldError(e, 'status'),
    );
  }
  const view = rootView(schema);
  const errors = validateNode(object, view, '').errors.map((e) => toFieldError(e, undefined));
  return [...errors, ...embeddedErrors(object, view, undefined)];
}

/** Decode then validate, for callers with no strategy step in between. */
function admit(
  schema: StructuralSchema,
  body: Record<string, unknown>,
  options: ValidateOptions = {},
): AdmitResult {
  const coerced = coerce(schema, body);
  return { ...coerced, errors: validate(schema, coerced.object, options) };
}

// ---------------------------------------------------------------------------------------------
// Answers

function renderValue(value: unknown): string {
  if (typeof value === 'string') return goQuote(value);
  if (typeof value === 'number') return goNumber(value);
  if (typeof value === 'boolean') return String(value);
  return goJson(value);
}

/** field.Error.ErrorBody: what a Status cause's message says. */
function errorBody(error: FieldError): string {
  const label: Record<FieldErrorType, string> = {
    FieldValueRequired: 'Required value',
    FieldValueInvalid: 'Invalid value',
    FieldValueTypeInvalid: 'Invalid value',
    FieldValueNotSupported: 'Unsupported value',
    FieldValueTooLong: 'Too long',
    FieldValueTooMany: 'Too many',
  };
  const withValue = error.type !== 'FieldValueRequired' && error.type !== 'FieldValueTooLong';
  const body = withValue
    ? `${label[error.type]}: ${renderValue(error.badValue)}`
    : label[error.type];
  return error.detail === '' ? body : `${body}: ${error.detail}`;
}

/**
 * The message and details of a 422 Invalid Status, as apimachinery's errors.NewInvalid builds
 * them (the server wraps them in the Status): the message lists
 * the errors (in brackets when there are several, duplicates once), details.causes each one.
 */
function invalidStatus(
  kind: string,
  group: string,
  name: string,
  errors: FieldError[],
): InvalidStatus {
  const qualified = group === '' ? kind : `${kind}.${group}`;
  const rendered = [...new Set(errors.map((e) => `${e.field}: ${errorBody(e)}`))];
  const list = rendered.length === 1 ? rendered[0] : `[${rendered.join(', ')}]`;
  const message =
    rendered.length === 0
      ? `${qualified} ${goQuote(name)} is invalid`
      : `${qualified} ${goQuote(name)} is invalid: ${list}`;
  const causes = errors.map((e) => {
    const cause: { reason: FieldErrorType; message?: string; field?: string } = { reason: e.type };
    const body = errorBody(e);
    if (body !== '') cause.message = body;
    if (e.field !== '') cause.field = e.field;
    return cause;
  });
  return {
    message,
    details: {
      ...(name === '' ? {} : { name }),
      ...(group === '' ? {} : { group }),
      kind,
      ...(causes.length === 0 ? {} : { causes }),
    },
  };
}

/**
 * The message of the 400 BadRequest kube answers fieldValidation=Strict with when fields were
 * pruned (handlers.transformDecodeError around runtime.strictDecodingError).
 */
function strictDecodingMessage(kind: string, version: string, unknownFields: string[]): string {
  const errors = unknownFields.map((path) => `unknown field "${path}"`).join(', ');
  return `${kind} in version ${goQuote(version)} cannot be handled as a ${kind}: strict decoding error: ${errors}`;
}

/** net.NewWarningHeader: code 299, agent "-", the text quoted; none for control characters. */
function warningHeader(text: string): string | undefined {
  if (/\p{Cc}/u.test(text)) return undefined;
  return `299 - "${text.replace(/["\\]/g, (c) => `\\${c}`)}"`;
}

/**
 * The Warning header values for fieldValidation=Warn (the default): one `unknown field "…"` per
 * path, deduplicated and truncated as the apiserver's warning recorder does (4096 runes in all,
 * then each warning cut to 256).
 */
function unknownFieldWarnings(unknownFields: string[]): string[] {
  const [total, item] = [4096, 256];
  const cut = (text: string) => (runeCount(text) > item ? [...text].slice(0, item).join('') : text);
  const headers: string[] = [];
  const ordered: string[] = [];
  let written = 0;
  let truncating = false;
  for (const text of unknownFields.map((path) => `unknown field "${path}"`)) {
    if (truncating && written >= total) break;
    if (ordered.includes(text)) continue;
    ordered.push(text);
    const shown = truncating ? cut(text) : text;
    const header = warningHeader(shown);
    if (header === undefined) continue;
    if (truncating || written + runeCount(shown) <= total) {
      written += runeCount(shown);
      headers.push(header);
      continue;
    }
    // Over the limit: start again with every warning so far cut short.
    truncating = true;
    written = 0;
    headers.length = 0;
    for (const earlier of ordered.map(cut)) {
      const replay = warningHeader(earlier);
      if (replay === undefined) continue;
      written += runeCount(earlier);
      headers.push(replay);
    }
  }
  return headers;
}

/** The openAPIV3Schema of one version of a CRD object (as customResourceDefinitions() gives). */
function crdSchema(crd: unknown, version: string): StructuralSchema | undefined {
  const versions = (crd as { spec?: { versions?: unknown } } | undefined)?.spec?.versions;
  if (!Array.isArray(versions)) return undefined;
  const found = (
    versions as Array<{ name?: unknown; schema?: { openAPIV3Schema?: unknown } }>
  ).find((v) => v.name === version);
  const schema = found?.schema?.openAPIV3Schema;
  return isObject(schema) ? schema : undefined;
}

export {
  admit,
  coerce,
  validate,
  invalidStatus,
  strictDecodingMessage,
  unknownFieldWarnings,
  crdSchema,
};
export type { StructuralSchema, FieldError };
