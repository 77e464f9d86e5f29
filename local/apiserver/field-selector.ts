/**
 * Field selectors (the `fieldSelector` query parameter): `a=b`, `a==b` and `a!=b` terms ANDed by
 * commas, values escaped with a backslash (`\,`, `\=`, `\\`), parsed as k8s.io/apimachinery
 * pkg/fields/selector.go does. Each kind selects on the fields kube-apiserver lets it (the field
 * label conversions of pkg/apis/core/v1/conversion.go, and metadata.name/namespace for custom
 * resources); any other field is refused with kube's 400.
 */
import { ApiError } from './store.js';
import type { KubeObject, ResourceType } from './store.js';

interface FieldRequirement {
  field: string;
  /** `==` is `=`. */
  op: '=' | '!=';
  value: string;
}

/** A selector kube refuses: the server answers 400 BadRequest with the message. */
class FieldSelectorError extends ApiError {
  constructor(message: string) {
    super(400, 'BadRequest', message);
  }
}

type FieldOf = (object: KubeObject) => string;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A string field as a Go struct holds it: absent is "". */
function text(object: unknown, ...path: string[]): string {
  let value = object;
  for (const key of path) value = isRecord(value) ? value[key] : undefined;
  return typeof value === 'string' ? value : '';
}

const name: FieldOf = (o) => o.metadata.name;
const namespace: FieldOf = (o) => o.metadata.namespace ?? '';

/**
 * The selectable fields of the core kinds served here and their values (the registries'
 * GetAttrs). Node is cluster-scoped: kube refuses metadata.namespace for it.
 */
const coreFields: Readonly<Record<string, Readonly<Record<string, FieldOf>>>> = {
  Node: {
    'metadata.name': name,
    'spec.unschedulable': (o) => String(isRecord(o['spec']) && o['spec']['unschedulable'] === true),
  },
  Secret: { 'metadata.name': name, 'metadata.namespace': namespace, type: (o) => text(o, 'type') },
  Event: {
    'metadata.name': name,
    'metadata.namespace': namespace,
    'involvedObject.kind': (o) => text(o, 'involvedObject', 'kind'),
    'involvedObject.namespace': (o) => text(o, 'involvedObject', 'namespace'),
    'involvedObject.name': (o) => text(o, 'involvedObject', 'name'),
    'involvedObject.uid': (o) => text(o, 'involvedObject', 'uid'),
    'involvedObject.apiVersion': (o) => text(o, 'involvedObject', 'apiVersion'),
    'involvedObject.resourceVersion': (o) => text(o, 'involvedObject', 'resourceVersion'),
    'involvedObject.fieldPath': (o) => text(o, 'involvedObject', 'fieldPath'),
    reason: (o) => text(o, 'reason'),
    reportingComponent: (o) => text(o, 'reportingComponent'),
    // The old API's source component, else the new API's reporting controller.
    source: (o) => text(o, 'source', 'component') || text(o, 'reportingComponent'),
    type: (o) => text(o, 'type'),
  },
};

type Selectable = Pick<ResourceType, 'group' | 'kind' | 'namespaced'>;

/** Custom resources (CRD selectableFields are not served): name, and namespace if namespaced. */
function fieldsOf(type: Selectable): Readonly<Record<string, FieldOf>> {
  const core = type.group === '' ? coreFields[type.kind] : undefined;
  if (core !== undefined) return core;
  return type.namespaced
    ? { 'metadata.name': name, 'metadata.namespace': namespace }
    : { 'metadata.name': name };
}

/** The comma-separated terms; an escaped comma stays in its term, backslash and all. */
function splitTerms(selector: string): string[] {
  const terms: string[] = [];
  let [start, escaped] = [0, false];
  for (let i = 0; i < selector.length; i++) {
    if (escaped) escaped = false;
    else if (selector[i] === '\\') escaped = true;
    else if (selector[i] === ',') {
      terms.push(selector.slice(start, i));
      start = i + 1;
    }
  }
  terms.push(selector.slice(start));
  return terms;
}

/** The first operator splits the term (`!=` and `==` before `=`): a field name has no escapes. */
function splitTerm(term: string): FieldRequirement | undefined {
  for (let i = 0; i < term.length; i++) {
    for (const op of ['!=', '==', '='] as const) {
      if (term.startsWith(op, i)) {
        return {
          field: term.slice(0, i),
          op: op === '!=' ? '!=' : '=',
          value: term.slice(i + op.length),
        };
      }
    }
  }
  return undefined;
}

/** UnescapeValue: `\\`, `\,` and `\=` are the escapes; a bare `,` or `=` is an error. */
function unescapeValue(value: string): string {
  let result = '';
  let escaped = false;
  for (const char of value) {
    if (escaped) {
      if (char !== '\\' && char !== ',' && char !== '=') {
        throw new FieldSelectorError(`invalid field selector: invalid escape sequence: \\${char}`);
      }
      result += char;
      escaped = false;
    } else if (char === '\\') {
      escaped = true;
    } else if (char === ',' || char === '=') {
      // Go prints the rune with %v: its code point.
      throw new FieldSelectorError(
        `invalid field selector: unescaped character in value: ${char.codePointAt(0)}`,
      );
    } else {
      result += char;
    }
  }
  if (escaped) throw new FieldSelectorError('invalid field selector: invalid escape sequence: \\');
  return result;
}

/**
 * Parses a selector for a type, as kube does: every term is parsed (in sorted order) before any
 * field is checked against the type's selectable fields. Throws FieldSelectorError.
 */
function parseFieldSelector(selector: string, type: Selectable): FieldRequirement[] {
  const terms = selector === '' ? [] : splitTerms(selector).sort();
  const requirements = terms
    .filter((term) => term !== '')
    .map((term) => {
      const requirement = splitTerm(term);
      if (requirement === undefined) {
        throw new FieldSelectorError(`invalid selector: '${selector}'; can't understand '${term}'`);
      }
      return { ...requirement, value: unescapeValue(requirement.value) };
    });
  const fields = fieldsOf(type);
  for (const { field } of requirements) {
    if (!Object.hasOwn(fields, field)) {
      throw new FieldSelectorError(`field label not supported: ${field}`);
    }
  }
  return requirements;
}

/** Whether an object of the type satisfies every requirement (none: everything matches). */
function matchesFields(
  requirements: readonly FieldRequirement[],
  type: Selectable,
  object: KubeObject,
): boolean {
  const fields = fieldsOf(type);
  return requirements.every(({ field, op, value }) => {
    const actual = Object.hasOwn(fields, field) ? fields[field]!(object) : '';
    return op === '=' ? actual === value : actual !== value;
  });
}

export { parseFieldSelector, matchesFields, FieldSelectorError };
export type { FieldRequirement };
