/**
 * Server-side printing, as kube-apiserver does it for `kubectl get`: the Accept negotiation that
 * asks for a meta.k8s.io Table, the Table itself (rows of cells, each with the object as
 * `includeObject` asks), Tables for watch events, and the columns: kube's built-in printers for
 * the core kinds served here, and CRD additionalPrinterColumns evaluated with kube's JSONPath.
 *
 * Ported from k8s.io/apiserver pkg/endpoints/handlers/{response.go,negotiation/negotiate.go},
 * k8s.io/apiextensions-apiserver pkg/registry/customresource/tableconvertor/tableconvertor.go,
 * k8s.io/client-go util/jsonpath, k8s.io/apimachinery pkg/util/duration and
 * k8s.io/kubernetes pkg/printers/internalversion/printers.go.
 */
import { ApiError } from './store.js';
import type { KubeObject } from './store.js';
import type { PrinterColumn } from './types.js';

type TableVersion = 'v1' | 'v1beta1';
type IncludeObject = 'None' | 'Metadata' | 'Object';
type Cell = string | number | boolean | null;

/** What a request's Accept header asks for, or why it cannot be served (406). */
type Output =
  | { as: 'Object' }
  | { as: 'Table'; version: TableVersion }
  | { as: 'NotAcceptable'; message: string };

interface TableColumnDefinition {
  name: string;
  type: string;
  format: string;
  description: string;
  priority: number;
}

/** A column: its definition and how a cell is made from an object (`now`: epoch ms). */
interface Column {
  name: string;
  type: string;
  format?: string;
  description: string;
  priority?: number;
  cell(object: KubeObject, now: number): Cell;
}

interface TableRow {
  cells: Cell[];
  object: Record<string, unknown> | null;
}

interface ListMeta {
  resourceVersion?: string;
  continue?: string;
  remainingItemCount?: number;
}

interface Table {
  kind: 'Table';
  apiVersion: string;
  metadata: ListMeta;
  /** null on every watch event after the first, as kube sends it. */
  columnDefinitions: TableColumnDefinition[] | null;
  rows: TableRow[];
}

interface TableOptions {
  version: TableVersion;
  includeObject: IncludeObject;
  /** The clock ages are computed against (tests). */
  now?: Date;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

// ---------------------------------------------------------------------------------------------
// Accept negotiation (apiserver negotiation/negotiate.go over munnerz/goautoneg)

interface AcceptClause {
  type: string;
  subType: string;
  q: number;
  params: Map<string, string>;
}

/** goautoneg's nextSplitElement: the text before the first `sep`, and the rest after it. */
function splitFirst(text: string, sep: string): [string, string] {
  const at = text.indexOf(sep);
  return at === -1 ? [text, ''] : [text.slice(0, at), text.slice(at + 1)];
}

/** goautoneg trims spaces only, not tabs. */
function trimSpaces(text: string): string {
  return text.replace(/^ +| +$/g, '');
}

/**
 * strconv.ParseFloat(text, 32) for the decimal spellings (at float32 precision, so that equal
 * qualities compare equal as in Go); anything else fails, and goautoneg then uses 0.
 */
function parseQuality(text: string): number {
  const decimal = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(text);
  return decimal ? Math.fround(Number(text)) : 0;
}

function parseClauseParams(text: string, clause: AcceptClause): void {
  let remaining = text;
  while (remaining.length > 0) {
    let param: string;
    [param, remaining] = splitFirst(remaining, ';');
    const [key, afterKey] = splitFirst(param, '=');
    if (afterKey === '') continue; // no value: goautoneg drops the parameter
    const [value, extra] = splitFirst(afterKey, '=');
    if (extra !== '') continue;
    const token = trimSpaces(key);
    if (token === 'q') clause.q = parseQuality(value);
    else clause.params.set(token, trimSpaces(value));
  }
}

function parseClause(part: string): AcceptClause | undefined {
  const [mediaRange, params] = splitFirst(trimSpaces(part), ';');
  const [typeText, afterType] = splitFirst(mediaRange, '/');
  const type = trimSpaces(typeText);
  let subType = '*';
  if (afterType === '') {
    if (type !== '*') return undefined;
  } else {
    const [subTypeText, extra] = splitFirst(afterType, '/');
    if (extra !== '') return undefined;
    subType = trimSpaces(subTypeText);
  }
  const clause: AcceptClause = { type, subType, q: 1, params: new Map() };
  parseClauseParams(params, clause);
  return clause;
}

/** goautoneg's ordering: it is not a strict weak order, so its sort is ported as is. */
function precedes(a: AcceptClause, b: AcceptClause): boolean {
  if (a.q > b.q) return true;
  if (a.type !== '*' && b.type === '*') return true;
  return a.subType !== '*' && b.subType === '*';
}

/** goautoneg.ParseAccept. Go's sort.Sort is an insertion sort below 13 elements. */
function parseAccept(header: string): AcceptClause[] {
  const clauses: AcceptClause[] = [];
  let remaining = header;
  while (remaining.length > 0) {
    let part: string;
    [part, remaining] = splitFirst(remaining, ',');
    const clause = parseClause(part);
    if (clause !== undefined) clauses.push(clause);
  }
  for (let i = 1; i < clauses.length; i++) {
    for (let j = i; j > 0 && precedes(clauses[j]!, clauses[j - 1]!); j--) {
      [clauses[j - 1], clauses[j]] = [clauses[j]!, clauses[j - 1]!];
    }
  }
  return clauses;
}

/** Only JSON is served, so only clauses a JSON serializer matches are considered. */
function matchesJson(clause: AcceptClause): boolean {
  if (clause.type === '*') return clause.subType === '*';
  return clause.type === 'application' && (clause.subType === 'json' || clause.subType === '*');
}

/**
 * acceptMediaTypeOptions and RequestScope.AllowsMediaTypeTransform: a conversion must name
 * meta.k8s.io v1 or v1beta1. kube also converts to PartialObjectMetadata(List); this server does
 * not, so such a clause is skipped as kube skips one it cannot serve.
 */
function outputOf(params: ReadonlyMap<string, string>): Output | undefined {
  const stream = params.get('stream');
  if (stream !== undefined && stream !== '' && stream !== 'watch') return undefined;
  const [as, group, version] = [params.get('as'), params.get('g'), params.get('v')];
  if (as === undefined && group === undefined && version === undefined) return { as: 'Object' };
  if (group !== 'meta.k8s.io' || (version !== 'v1' && version !== 'v1beta1')) return undefined;
  return as === 'Table' ? { as: 'Table', version } : undefined;
}

/**
 * What the Accept header asks for: the first clause (by goautoneg's order) this server can serve.
 * kubectl get sends `application/json;as=Table;v=v1;g=meta.k8s.io,...,application/json`.
 */
function negotiateOutput(accept: string | undefined): Output {
  if (accept === undefined || accept === '') return { as: 'Object' };
  for (const clause of parseAccept(accept)) {
    const output = matchesJson(clause) ? outputOf(clause.params) : undefined;
    if (output !== undefined) return output;
  }
  return {
    as: 'NotAcceptable',
    message: 'only the following media types are accepted: application/json',
  };
}

/**
 * The `includeObject` query parameter of a Table request (response.go optionsForTransform);
 * a value kube refuses is a 400 with kube's message.
 */
function includeObjectOf(query: URLSearchParams): IncludeObject {
  const value = query.get('includeObject') ?? '';
  if (value === '') return 'Metadata';
  if (value === 'None' || value === 'Metadata' || value === 'Object') return value;
  throw new ApiError(
    400,
    'BadRequest',
    `Unable to convert to Table as requested: includeObject: Invalid value: ${goJson(value)}: must be 'Metadata', 'Object', 'None', or empty`,
  );
}

// ---------------------------------------------------------------------------------------------
// Durations and times (apimachinery pkg/util/duration, metav1.Time)

const second = 1000;
const minute = 60 * second;
const hour = 60 * minute;

/**
 * duration.HumanDuration: ~2-3 significant figures of a duration given in milliseconds ("5s",
 * "3m2s", "2d3h", "2y1d"). Go's int conversions truncate toward zero; so does Math.trunc.
 */
function humanDuration(ms: number): string {
  const seconds = Math.trunc(ms / second);
  // Up to 2s in the future is clock skew, "now"; more is an error.
  if (seconds < -1) return '<invalid>';
  if (seconds < 0) return '0s';
  if (seconds < 60 * 2) return `${seconds}s`;
  const minutes = Math.trunc(ms / minute);
  if (minutes < 10) {
    const s = seconds % 60;
    return s === 0 ? `${minutes}m` : `${minutes}m${s}s`;
  }
  if (minutes < 60 * 3) return `${minutes}m`;
  const hours = Math.trunc(ms / hour);
  if (hours < 8) {
    const m = minutes % 60;
    return m === 0 ? `${hours}h` : `${hours}h${m}m`;
  }
  if (hours < 48) return `${hours}h`;
  const days = Math.trunc(hours / 24);
  if (hours < 24 * 8) {
    const h = hours % 24;
    return h === 0 ? `${days}d` : `${days}d${h}h`;
  }
  if (hours < 24 * 365 * 2) return `${days}d`;
  const years = Math.trunc(days / 365);
  if (hours < 24 * 365 * 8) {
    const d = days % 365;
    return d === 0 ? `${years}y` : `${years}y${d}d`;
  }
  return `${years}y`;
}

const rfc3339 =
  /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:[.,](\d+))?(Z|([+-])(\d{2}):(\d{2}))$/;

/** time.Parse(time.RFC3339, text) as epoch ms (fraction kept), or undefined where Go fails. */
function parseRfc3339(text: string): number | undefined {
  const m = rfc3339.exec(text);
  if (m === null) return undefined;
  const n = (group: number) => Number(m[group] ?? 0);
  const date = new Date(0);
  date.setUTCFullYear(n(1), n(2) - 1, n(3)); // unlike Date.UTC, years below 100 stay literal
  if (date.getUTCMonth() !== n(2) - 1 || date.getUTCDate() !== n(3)) return undefined;
  if (n(4) > 23 || n(5) > 59 || n(6) > 59 || n(10) > 23 || n(11) > 59) return undefined;
  const fraction = Number(`0.${m[7] ?? '0'}`) * second;
  const offset = (m[9] === '-' ? -1 : 1) * (n(10) * hour + n(11) * minute);
  return date.getTime() + n(4) * hour + n(5) * minute + n(6) * second + fraction - offset;
}

/** Go's zero time.Time: a metav1.Time that is not set. */
const zeroTime = parseRfc3339('0001-01-01T00:00:00Z');

/** A metav1.Time field's instant; undefined when it is not set (absent, null or zero). */
function timeOf(timestamp: unknown): number | undefined {
  const time = typeof timestamp === 'string' ? parseRfc3339(timestamp) : undefined;
  return time === zeroTime ? undefined : time;
}

/** translateTimestampSince: the age of a metav1.Time (not set: "<unknown>"). */
function ageOf(timestamp: unknown, now: number): string {
  const time = timeOf(timestamp);
  return time === undefined ? '<unknown>' : humanDuration(now - time);
}

// ---------------------------------------------------------------------------------------------
// Go's text and JSON renderings of JSON values (what jsonpath's PrintResults writes)

/** encoding/json escapes these even inside strings, for HTML safety. */
function goString(text: string): string {
  return JSON.stringify(text).replace(
    /[<>&\u2028\u2029]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

/** json.Marshal of a decoded JSON value: map keys sorted, HTML characters escaped. */
function goJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(goJson).join(',')}]`;
  if (isRecord(value)) {
    const keys = Object.keys(value).sort();
    return `{${keys.map((k) => `${goString(k)}:${goJson(value[k])}`).join(',')}}`;
  }
  if (typeof value === 'string') return goString(value);
  // Numbers: encoding/json picks the same shortest form and exponent thresholds as JS.
  return JSON.stringify(value) ?? 'null';
}

/**
 * fmt.Print of a JSON number as Go decodes it: an integer is an int64, anything else a float64,
 * printed %g-style (exponent from 1e+06 and below 1e-04).
 */
function goNumber(n: number): string {
  if (Number.isInteger(n) && Math.abs(n) < 2 ** 63) return String(n);
  const [digits, exponentText] = n.toExponential().split('e') as [string, string];
  const exponent = Number(exponentText);
  if (exponent >= -4 && exponent < 6) return String(n);
  const sign = exponent < 0 ? '-' : '+';
  return `${digits}e${sign}${String(Math.abs(exponent)).padStart(2, '0')}`;
}

/** jsonpath's PrintResults of one value: maps and lists as JSON, scalars as fmt.Print. */
function printResult(value: unknown): string {
  if (value === null || value === undefined) return '<no value>';
  if (typeof value === 'object') return goJson(value);
  if (typeof value === 'number') return goNumber(value);
  return typeof value === 'string' ? value : String(value === true);
}

// ---------------------------------------------------------------------------------------------
// JSONPath: the subset of client-go util/jsonpath that printer columns use. kube's own dialect
// rather than the jsonpath-plus in node_modules: that one is only a transitive dependency,
// evaluates filters as script, and differs from kube on missing keys, comparisons of different
// types and results for several matches, which decide what a cell shows.

/** A path kube fails to parse or evaluate (when evaluating: the cell is null). */
class JsonPathError extends Error {}

interface SliceParam {
  value: number;
  known: boolean;
  derived: boolean;
}

type PathNode =
  | { kind: 'field'; name: string }
  | { kind: 'wildcard' }
  | { kind: 'slice'; params: readonly [SliceParam, SliceParam, SliceParam] }
  | { kind: 'filter'; left: PathNode[]; op: '==' | '!='; right: PathNode[] }
  | { kind: 'text'; value: string }
  | { kind: 'literal'; value: number | boolean };

const terminators = new Set([' ', '\t', '\r', '\n', '.', ',', '[', ']', '$', '@', '{', '}']);

/** strconv.Unquote for the escapes a column path could hold; others are refused. */
function unquote(quoted: string): string {
  const quote = quoted[0]!;
  const escapes: Record<string, string> = { '\\': '\\', n: '\n', t: '\t', r: '\r', [quote]: quote };
  return quoted.slice(1, -1).replace(/\\(u[0-9a-fA-F]{4}|.)/g, (_all, escape: string) => {
    if (escape.length === 5) return String.fromCharCode(parseInt(escape.slice(1), 16));
    const replacement = escapes[escape];
    if (replacement === undefined) throw new JsonPathError(`unquote string ${quoted} error`);
    return replacement;
  });
}

class PathParser {
  #pos = 0;

  constructor(private readonly text: string) {}

  parse(): PathNode[] {
    const nodes: PathNode[] = [];
    while (this.#pos < this.text.length) {
      const rest = this.text.slice(this.#pos);
      if (rest.startsWith('[?(')) nodes.push(this.#filter());
      else if (rest.startsWith('..')) throw new JsonPathError('recursive descent is not supported');
      else nodes.push(...this.#next(rest[0]!));
    }
    return nodes;
  }

  #next(char: string): PathNode[] {
    if (char === ' ' || char === '@' || char === '$') {
      this.#pos++; // the current object, or a space: nothing to evaluate
      return [];
    }
    if (char === '.') return [this.#field()];
    if (char === '[') return this.#bracket();
    if (char === '"' || char === "'") return [this.#quote(char)];
    if (/[-+0-9]/.test(char)) return [this.#number()];
    const word = /^[\p{L}\p{Nd}_]+/u.exec(this.text.slice(this.#pos))?.[0];
    if (word === 'true' || word === 'false') {
      this.#pos += word.length;
      return [{ kind: 'literal', value: word === 'true' }];
    }
    throw new JsonPathError(`unsupported at ${JSON.stringify(this.text.slice(this.#pos))}`);
  }

  /** A field name runs to the next unescaped terminator; then every backslash is dropped. */
  #field(): PathNode {
    const start = ++this.#pos;
    while (this.#pos < this.text.length) {
      const char = this.text[this.#pos]!;
      if (char !== '\\' && terminators.has(char)) break;
      this.#pos += char === '\\' ? 2 : 1;
    }
    const raw = this.text.slice(start, this.#pos);
    return raw === '*' ? { kind: 'wildcard' } : { kind: 'field', name: raw.replaceAll('\\', '') };
  }

  #bracket(): PathNode[] {
    const end = this.text.indexOf(']', this.#pos);
    const newline = this.text.indexOf('\n', this.#pos);
    if (end === -1 || (newline !== -1 && newline < end)) {
      throw new JsonPathError('unterminated array');
    }
    let inner = this.text.slice(this.#pos + 1, end);
    this.#pos = end + 1;
    if (inner.includes(',')) throw new JsonPathError('unions are not supported');
    const key = /^'([^']*)'$/.exec(inner);
    // As kube does: ['a.b'] is parsed as the path .a.b.
    if (key !== null) return new PathParser(`.${key[1]}`).parse();
    if (inner === '*') inner = ':';
    return [{ kind: 'slice', params: sliceParams(inner) }];
  }

  /** kube's filter scan: up to a `)` outside quotes, then `]`. */
  #filter(): PathNode {
    const start = this.#pos + 3;
    let [begin, end, pair, at] = [false, false, '', start];
    for (; ; at++) {
      const char = this.text[at];
      if (char === undefined || char === '\n') throw new JsonPathError('unterminated filter');
      if (char === '"' || char === "'") {
        if (!begin) [begin, pair] = [true, char];
        else if (char === pair && this.text[at - 1] !== '\\') end = true;
      } else if (char === ')' && begin === end) break;
    }
    if (this.text[at + 1] !== ']') throw new JsonPathError('unclosed array expect ]');
    this.#pos = at + 2;
    const parts = /^([^!<>=]+)([!<>=]+)(.+?)$/.exec(this.text.slice(start, at));
    if (parts === null) throw new JsonPathError('existence filters are not supported');
    const op = parts[2];
    if (op !== '==' && op !== '!=') {
      throw new JsonPathError(`filter operator ${op} is not supported`);
    }
    const left = new PathParser(parts[1]!).parse();
    const right = new PathParser(parts[3]!).parse();
    return { kind: 'filter', left, op, right };
  }

  #quote(quote: string): PathNode {
    let at = this.#pos + 1;
    while (!(this.text[at] === quote && this.text[at - 1] !== '\\')) {
      if (at >= this.text.length || this.text[at] === '\n') {
        throw new JsonPathError('unterminated quoted string');
      }
      at++;
    }
    const quoted = this.text.slice(this.#pos, at + 1);
    this.#pos = at + 1;
    return { kind: 'text', value: unquote(quoted) };
  }

  #number(): PathNode {
    const text = /^[-+]?[0-9.]*/.exec(this.text.slice(this.#pos))![0];
    this.#pos += text.length;
    if (!/^[-+]?(\d+\.?\d*|\.\d+)$/.test(text)) {
      throw new JsonPathError(`cannot parse number ${text}`);
    }
    return { kind: 'literal', value: Number(text) };
  }
}

/** parseArray's slice operator `[start:end:step]`, with kube's defaults. */
function sliceParams(text: string): readonly [SliceParam, SliceParam, SliceParam] {
  const parts = /^(-?\d*)(:-?\d*)?(:-?\d*)?$/.exec(text);
  if (parts === null) throw new JsonPathError(`invalid array index ${text}`);
  const params: SliceParam[] = [];
  for (let i = 0; i < 3; i++) {
    const raw = parts[i + 1] ?? '';
    const digits = i > 0 ? raw.slice(1) : raw;
    if (raw === '') {
      // `[n]` means `[n:n+1]`.
      const derived = i === 1;
      params.push({ value: derived ? params[0]!.value + 1 : 0, known: derived, derived });
    } else if (i > 0 && digits === '') {
      params.push({ value: 0, known: false, derived: false });
    } else {
      if (!/^[-+]?\d+$/.test(digits)) {
        throw new JsonPathError(`array index ${digits} is not a number`);
      }
      params.push({ value: Number(digits), known: true, derived: false });
    }
  }
  return params as [SliceParam, SliceParam, SliceParam];
}

/** Parses a printer column's jsonPath, as the CRD table convertor does with `{<path>}`. */
function parseJsonPath(path: string): PathNode[] {
  try {
    return new PathParser(path).parse();
  } catch (err) {
    if (!(err instanceof JsonPathError)) throw err;
    throw new Error(`unrecognized column definition ${JSON.stringify(path)}: ${err.message}`, {
      cause: err,
    });
  }
}

function evalField(input: readonly unknown[], name: string): unknown[] {
  // A missing key is no result, not an error: the convertor sets AllowMissingKeys.
  return input.flatMap((value) =>
    isRecord(value) && Object.hasOwn(value, name) ? [value[name]] : [],
  );
}

function evalWildcard(input: readonly unknown[]): unknown[] {
  return input.flatMap((value): unknown[] => {
    if (Array.isArray(value)) return value;
    if (isRecord(value)) return Object.values(value);
    if (typeof value === 'string') return [...Buffer.from(value, 'utf8')]; // Go indexes bytes
    return [];
  });
}

/** evalArray's start and end in an array of this length: unknown ones default, negatives wrap. */
function sliceBounds(length: number, first: SliceParam, last: SliceParam): [number, number] {
  let start = first.known ? first.value : 0;
  if (start < 0) start += length;
  let end = last.known ? last.value : length;
  if (end < 0 || (end === 0 && last.derived)) end += length;
  return [start, end];
}

/** evalArray's step: 1 unless given, and never zero or negative. */
function strideOf(step: SliceParam): number {
  if (step.known && step.value <= 0) throw new JsonPathError('step must be > 0');
  return step.known ? step.value : 1;
}

/** evalArray, including its quirk: an empty selection ends the evaluation of later inputs. */
function evalSlice(input: readonly unknown[], params: readonly SliceParam[]): unknown[] {
  const [first, last, step] = params as [SliceParam, SliceParam, SliceParam];
  const result: unknown[] = [];
  for (const value of input) {
    if (value === null || value === undefined) continue;
    if (!Array.isArray(value)) throw new JsonPathError('not array or slice');
    const length = value.length;
    const [start, end] = sliceBounds(length, first, last);
    if (end === start) return result;
    if (start >= length || start < 0 || end > length || end < 0 || start > end) {
      throw new JsonPathError('array index out of bounds');
    }
    const stride = strideOf(step);
    for (let i = start; i < end; i += stride) result.push(value[i]);
  }
  return result;
}

/** template.Equal: only booleans, numbers and strings compare, and only with their own kind. */
function goKind(value: unknown): string {
  if (typeof value === 'number') return Number.isInteger(value) ? 'int' : 'float';
  if (typeof value === 'boolean' || typeof value === 'string') return typeof value;
  throw new JsonPathError('invalid type for comparison');
}

function goEqual(left: unknown, right: unknown): boolean {
  if (goKind(left) !== goKind(right)) throw new JsonPathError('incompatible types for comparison');
  return left === right;
}

/** The one value a filter side yields for an element, or undefined when it yields none. */
function filterOperand(element: unknown, nodes: readonly PathNode[]): unknown {
  const values = evaluate([element], nodes);
  if (values.length > 1) throw new JsonPathError('can only compare one element at a time');
  return values.length === 0 ? undefined : values[0];
}

function evalFilter(input: readonly unknown[], node: Extract<PathNode, { kind: 'filter' }>) {
  const result: unknown[] = [];
  for (const value of input) {
    if (!Array.isArray(value)) throw new JsonPathError('not array or slice and cannot be filtered');
    for (const element of value) {
      const left = filterOperand(element, node.left);
      if (left === undefined) continue;
      const right = filterOperand(element, node.right);
      if (right === undefined) continue;
      if (goEqual(left, right) === (node.op === '==')) result.push(element);
    }
  }
  return result;
}

function evaluate(input: readonly unknown[], nodes: readonly PathNode[]): unknown[] {
  return nodes.reduce((values: unknown[], node) => step(values, node), [...input]);
}

function step(values: unknown[], node: PathNode): unknown[] {
  switch (node.kind) {
    case 'field':
      return evalField(values, node.name);
    case 'wildcard':
      return evalWildcard(values);
    case 'slice':
      return evalSlice(values, node.params);
    case 'filter':
      return evalFilter(values, node);
    case 'text':
      return [node.value];
    case 'literal':
      return values.map(() => node.value);
  }
}

// ---------------------------------------------------------------------------------------------
// Columns

const descriptions = {
  name: 'Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names',
  creationTimestamp:
    'CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata',
  kubeletVersion: 'Kubelet Version reported by the node.',
  addresses:
    "List of addresses reachable to the node. Queried from cloud provider, if available. More info: https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field is declared as mergeable, but the merge key is not sufficiently unique, which can cause data corruption when it is merged. Callers should instead use a full-replacement patch. See https://pr.k8s.io/79391 for an example. Consumers should assume that addresses can change during the lifetime of a Node. However, there are some exceptions where this may not be possible, such as Pods that inherit a Node's address in its own status or consumers of the downward API (status.hostIP).",
  osImage: 'OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).',
  kernelVersion: "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
  containerRuntimeVersion:
    'ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).',
  secretType:
    'Used to facilitate programmatic handling of secret data. More info: https://kubernetes.io/docs/concepts/configuration/secret/#secret-types',
  secretData:
    "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4",
  lastTimestamp: 'The time at which the most recent occurrence of this event was recorded.',
  eventType: 'Type of this event (Normal, Warning), new types could be added in the future',
  reason:
    "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
  involvedObject: 'The object that this event is about.',
  fieldPath:
    'If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2]. For example, if the object reference is to a container within a pod, this would take on a value like: "spec.containers{name}" (where "name" refers to the name of the container that triggered the event) or if no container name is specified "spec.containers[2]" (container with index 2 in this pod). This syntax is chosen only to have some well-defined way of referencing a part of an object.',
  source: 'The component reporting this event. Should be a short machine understandable string.',
  message: 'A human-readable description of the status of this operation.',
  firstTimestamp:
    'The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)',
  count: 'The number of times this event has occurred.',
} as const;

/** A field of an object by path; undefined where anything on the way is missing. */
function get(object: unknown, ...path: string[]): unknown {
  let value = object;
  for (const key of path) value = isRecord(value) ? value[key] : undefined;
  return value;
}

/** A string field as a Go struct holds it: absent is "". */
function text(object: unknown, ...path: string[]): string {
  const value = get(object, ...path);
  return typeof value === 'string' ? value : '';
}

function records(value: unknown): Record<string, unknown>[] {
  return Array.isArray(value) ? value.filter(isRecord) : [];
}

const nameColumn: Column = {
  name: 'Name',
  type: 'string',
  format: 'name',
  description: descriptions.name,
  cell: (o) => o.metadata.name,
};

/** Built-in printers say "string" for Age; CRD columns say "date". */
const ageColumn: Column = {
  name: 'Age',
  type: 'string',
  description: descriptions.creationTimestamp,
  cell: (o, now) => ageOf(o.metadata.creationTimestamp, now),
};

/** printNode: the Ready condition (the last one, as kube's map keeps), then cordoning. */
function nodeStatus(node: KubeObject): string {
  const ready = records(get(node, 'status', 'conditions'))
    .filter((c) => c['type'] === 'Ready')
    .at(-1);
  const status =
    ready === undefined ? ['Unknown'] : [ready['status'] === 'True' ? 'Ready' : 'NotReady'];
  if (get(node, 'spec', 'unschedulable') === true) status.push('SchedulingDisabled');
  return status.join(',');
}

/** findNodeRoles: node-role.kubernetes.io/<role> keys and kubernetes.io/role values, sorted. */
function nodeRoles(node: KubeObject): string {
  const roles = new Set<string>();
  for (const [key, value] of Object.entries(node.metadata.labels ?? {})) {
    const prefix = 'node-role.kubernetes.io/';
    if (key.startsWith(prefix) && key.length > prefix.length) roles.add(key.slice(prefix.length));
    else if (key === 'kubernetes.io/role' && value !== '') roles.add(value);
  }
  return roles.size === 0 ? '<none>' : [...roles].sort().join(',');
}

function nodeAddress(node: KubeObject, type: string): string {
  const address = records(get(node, 'status', 'addresses')).find((a) => a['type'] === type);
  return address === undefined ? '<none>' : text(address, 'address');
}

function nodeInfo(node: KubeObject, field: string): string {
  return text(node, 'status', 'nodeInfo', field) || '<unknown>';
}

/** An int32 field as a Go struct holds it: absent is 0. */
function int(value: unknown): number {
  return typeof value === 'number' ? Math.trunc(value) : 0;
}

/** printEvent's First Seen: firstTimestamp, else the events.k8s.io eventTime. */
function eventFirstSeen(event: KubeObject, now: number): string {
  const first = get(event, 'firstTimestamp');
  return ageOf(timeOf(first) !== undefined ? first : get(event, 'eventTime'), now);
}

/** printEvent's Last Seen: the series' last observation, else lastTimestamp, else First Seen. */
function eventLastSeen(event: KubeObject, now: number): string {
  const series = get(event, 'series');
  if (isRecord(series)) return ageOf(series['lastObservedTime'], now);
  const last = get(event, 'lastTimestamp');
  return timeOf(last) !== undefined ? ageOf(last, now) : eventFirstSeen(event, now);
}

/** A singleton event of the new API has no count: it happened once. */
function eventCount(event: KubeObject): number {
  const series = get(event, 'series');
  if (isRecord(series)) return int(series['count']);
  const count = int(get(event, 'count'));
  return count === 0 ? 1 : count;
}

/** The involved object as `kind/name`, kind lowercased as kube prints it. */
function eventObject(event: KubeObject): string {
  const kind = text(event, 'involvedObject', 'kind').toLowerCase();
  const name = text(event, 'involvedObject', 'name');
  return name === '' ? kind : `${kind}/${name}`;
}

/** formatEventSource: component (or reportingComponent), then host (or reportingInstance). */
function eventSource(event: KubeObject): string {
  const component = text(event, 'source', 'component') || text(event, 'reportingComponent');
  const instance = text(event, 'source', 'host') || text(event, 'reportingInstance');
  return instance === '' ? component : `${component}, ${instance}`;
}

const crdAgeColumn: PrinterColumn = {
  name: 'Age',
  type: 'date',
  description: descriptions.creationTimestamp,
  jsonPath: '.metadata.creationTimestamp',
};

/** A date column's cell: the age, or what kubectl shows for an empty or unparsable time. */
function dateCell(value: unknown, now: number): Cell {
  if (typeof value !== 'string') return null;
  if (value === '' || value === 'null') return '<unknown>'; // metav1.Time's empty forms
  return parseRfc3339(value) === undefined ? '<invalid>' : ageOf(value, now);
}

/** cellForJSONValue's cases, by column type; a type not here has only null cells. */
const cellsByType = new Map<string, (value: unknown, now: number) => Cell>([
  ['integer', (value) => (typeof value === 'number' ? Math.trunc(value) : null)],
  ['number', (value) => (typeof value === 'number' ? value : null)],
  ['boolean', (value) => (typeof value === 'boolean' ? value : null)],
  ['string', (value) => (typeof value === 'string' ? value : null)],
  ['date', dateCell],
]);

/**
 * The cell of a CRD column (tableconvertor.go cellForJSONValue): a value of the wrong type is
 * null, which kubectl prints as an empty cell.
 */
function cellForJsonValue(type: string, value: unknown, now: number): Cell {
  if (value === null || value === undefined) return null;
  const cell = cellsByType.get(type);
  return cell === undefined ? null : cell(value, now);
}

/** A printer column's cell: the first result only, as kube ("only simple JSON path"). */
function crdCell(path: readonly PathNode[], type: string, object: KubeObject, now: number): Cell {
  let results: unknown[];
  try {
    results = evaluate([object], path);
  } catch (err) {
    if (err instanceof JsonPathError) return null;
    throw err;
  }
  if (results.length === 0) return null;
  return type === 'string' ? printResult(results[0]) : cellForJsonValue(type, results[0], now);
}

/**
 * Columns from a CRD version's additionalPrinterColumns: Name first, then each column (none:
 * Age). A path kube would not parse throws, as kube refuses such a CRD.
 */
function crdColumns(printerColumns: readonly PrinterColumn[]): Column[] {
  const columns = printerColumns.length > 0 ? printerColumns : [crdAgeColumn];
  return [
    nameColumn,
    ...columns.map((column): Column => {
      const path = parseJsonPath(column.jsonPath);
      return {
        name: column.name,
        type: column.type,
        format: column.format ?? '',
        description:
          column.description ||
          `Custom resource definition column (in JSONPath format): ${column.jsonPath}`,
        priority: column.priority ?? 0,
        cell: (object, now) => crdCell(path, column.type, object, now),
      };
    }),
  ];
}

/**
 * The printers, by kind (`Kind.group` outside the core group). The core kinds' columns are
 * kube's, all of them (the server prints wide, kubectl hides priority 1 unless -o wide). Knative's
 * CRD is not in shared/crds, so its printer columns are copied from knative/serving
 * config/core/300-resources/service.yaml.
 */
const printers: Readonly<Record<string, readonly Column[]>> = {
  Node: [
    nameColumn,
    { name: 'Status', type: 'string', description: 'The status of the node', cell: nodeStatus },
    { name: 'Roles', type: 'string', description: 'The roles of the node', cell: nodeRoles },
    ageColumn,
    {
      name: 'Version',
      type: 'string',
      description: descriptions.kubeletVersion,
      cell: (o) => text(o, 'status', 'nodeInfo', 'kubeletVersion'),
    },
    {
      name: 'Internal-IP',
      type: 'string',
      priority: 1,
      description: descriptions.addresses,
      cell: (o) => nodeAddress(o, 'InternalIP'),
    },
    {
      name: 'External-IP',
      type: 'string',
      priority: 1,
      description: descriptions.addresses,
      cell: (o) => nodeAddress(o, 'ExternalIP'),
    },
    {
      name: 'OS-Image',
      type: 'string',
      priority: 1,
      description: descriptions.osImage,
      cell: (o) => nodeInfo(o, 'osImage'),
    },
    {
      name: 'Kernel-Version',
      type: 'string',
      priority: 1,
      description: descriptions.kernelVersion,
      cell: (o) => nodeInfo(o, 'kernelVersion'),
    },
    {
      name: 'Container-Runtime',
      type: 'string',
      priority: 1,
      description: descriptions.containerRuntimeVersion,
      cell: (o) => nodeInfo(o, 'containerRuntimeVersion'),
    },
  ],
  Secret: [
    nameColumn,
    {
      name: 'Type',
      type: 'string',
      description: descriptions.secretType,
      cell: (o) => text(o, 'type'),
    },
    {
      name: 'Data',
      type: 'string',
      description: descriptions.secretData,
      cell: (o) => {
        const data = get(o, 'data');
        return isRecord(data) ? Object.keys(data).length : 0;
      },
    },
    ageColumn,
  ],
  Event: [
    {
      name: 'Last Seen',
      type: 'string',
      description: descriptions.lastTimestamp,
      cell: eventLastSeen,
    },
    {
      name: 'Type',
      type: 'string',
      description: descriptions.eventType,
      cell: (o) => text(o, 'type'),
    },
    {
      name: 'Reason',
      type: 'string',
      description: descriptions.reason,
      cell: (o) => text(o, 'reason'),
    },
    { name: 'Object', type: 'string', description: descriptions.involvedObject, cell: eventObject },
    {
      name: 'Subobject',
      type: 'string',
      priority: 1,
      description: descriptions.fieldPath,
      cell: (o) => text(o, 'involvedObject', 'fieldPath'),
    },
    {
      name: 'Source',
      type: 'string',
      priority: 1,
      description: descriptions.source,
      cell: eventSource,
    },
    {
      name: 'Message',
      type: 'string',
      description: descriptions.message,
      cell: (o) => text(o, 'message').trim(),
    },
    {
      name: 'First Seen',
      type: 'string',
      priority: 1,
      description: descriptions.firstTimestamp,
      cell: eventFirstSeen,
    },
    {
      name: 'Count',
      type: 'string',
      priority: 1,
      description: descriptions.count,
      cell: eventCount,
    },
    { ...nameColumn, priority: 1 },
  ],
  'Service.serving.knative.dev': crdColumns([
    { name: 'URL', type: 'string', jsonPath: '.status.url' },
    { name: 'LatestCreated', type: 'string', jsonPath: '.status.latestCreatedRevisionName' },
    { name: 'LatestReady', type: 'string', jsonPath: '.status.latestReadyRevisionName' },
    { name: 'Ready', type: 'string', jsonPath: ".status.conditions[?(@.type=='Ready')].status" },
    { name: 'Reason', type: 'string', jsonPath: ".status.conditions[?(@.type=='Ready')].reason" },
  ]),
};

const crdColumnCache = new WeakMap<object, readonly Column[]>();

/**
 * The columns of a served type: its built-in printer, else its CRD printer columns (`columns`,
 * from the CRD version), else a CRD's defaults (Name, Age).
 */
function columnsFor(type: {
  group: string;
  kind: string;
  columns?: readonly PrinterColumn[];
}): readonly Column[] {
  const builtin = printers[type.group === '' ? type.kind : `${type.kind}.${type.group}`];
  if (builtin !== undefined) return builtin;
  let columns = crdColumnCache.get(type);
  if (columns === undefined) {
    columns = crdColumns(type.columns ?? []);
    crdColumnCache.set(type, columns);
  }
  return columns;
}

// ---------------------------------------------------------------------------------------------
// Tables

function definitionOf(column: Column): TableColumnDefinition {
  return {
    name: column.name,
    type: column.type,
    format: column.format ?? '',
    description: column.description,
    priority: column.priority ?? 0,
  };
}

/** ObjectMeta's fields in its JSON order: what meta.AsPartialObjectMetadata keeps. */
const objectMetaFields = [
  'name',
  'generateName',
  'namespace',
  'selfLink',
  'uid',
  'resourceVersion',
  'generation',
  'creationTimestamp',
  'deletionTimestamp',
  'deletionGracePeriodSeconds',
  'labels',
  'annotations',
  'ownerReferences',
  'finalizers',
  'managedFields',
] as const;

function partialObjectMetadata(object: KubeObject, version: TableVersion): Record<string, unknown> {
  const metadata: Record<string, unknown> = {};
  for (const field of objectMetaFields) {
    const value = object.metadata[field];
    if (value !== undefined) metadata[field] = value;
  }
  return { kind: 'PartialObjectMetadata', apiVersion: `meta.k8s.io/${version}`, metadata };
}

/** A row's `object`, per includeObject (response.go asTable). */
function rowObject(object: KubeObject, options: TableOptions): Record<string, unknown> | null {
  switch (options.includeObject) {
    case 'None':
      return null;
    case 'Object':
      return object;
    case 'Metadata':
      return partialObjectMetadata(object, options.version);
  }
}

function buildTable(
  columns: readonly Column[],
  objects: readonly KubeObject[],
  list: ListMeta,
  options: TableOptions,
  headers: boolean,
): Table {
  const now = (options.now ?? new Date()).getTime();
  const metadata: ListMeta = {};
  if (list.resourceVersion) metadata.resourceVersion = list.resourceVersion;
  if (list.continue) metadata.continue = list.continue;
  if (list.remainingItemCount !== undefined) metadata.remainingItemCount = list.remainingItemCount;
  return {
    kind: 'Table',
    apiVersion: `meta.k8s.io/${options.version}`,
    metadata,
    columnDefinitions: headers ? columns.map(definitionOf) : null,
    rows: objects.map((object) => ({
      cells: columns.map((column) => column.cell(object, now)),
      object: rowObject(object, options),
    })),
  };
}

/**
 * The Table of a list (pass the list's metadata) or of one object (pass `{ resourceVersion }` of
 * the object), as kube-apiserver returns it.
 */
function tableOf(
  columns: readonly Column[],
  objects: readonly KubeObject[],
  list: ListMeta,
  options: TableOptions,
): Table {
  return buildTable(columns, objects, list, options, true);
}

/**
 * For a watch with as=Table: each event's object is a Table of one row, and only the first
 * carries the column definitions (later ones: null), as the watchEmbeddedEncoder of apiserver's
 * handlers/response.go sends them. One encoder per watch; ERROR events carry their Status as is.
 */
function watchTableEncoder(
  columns: readonly Column[],
  options: TableOptions,
): (object: KubeObject) => Table {
  let first = true;
  return (object) => {
    const list = { resourceVersion: object.metadata.resourceVersion };
    const table = buildTable(columns, [object], list, options, first);
    first = false;
    return table;
  };
}

export {
  negotiateOutput,
  includeObjectOf,
  columnsFor,
  crdColumns,
  tableOf,
  watchTableEncoder,
  humanDuration,
};
export type { Output, TableOptions };
