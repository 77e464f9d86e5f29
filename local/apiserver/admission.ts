/**
 * A custom resource's write checked as kube-apiserver checks it against the CRD's schema: fields
 * the schema does not declare are pruned (fieldValidation=Strict refuses them with 400, Warn — the
 * default — answers Warning headers, Ignore is silent), defaults are applied, then the object is
 * validated (422 Invalid naming each field). Kinds without a schema are stored as sent.
 */
import {
  coerce,
  invalidStatus,
  strictDecodingMessage,
  unknownFieldWarnings,
  validate,
} from './schema.js';
import type { StructuralSchema } from './schema.js';
import { ApiError } from './store.js';
import type { Admit } from './store.js';
import type { ServedType } from './types.js';

type FieldValidation = 'Strict' | 'Warn' | 'Ignore';

/** The fieldValidation query parameter (absent: Warn, as kube-apiserver defaults it). */
function fieldValidationOf(query: URLSearchParams): FieldValidation {
  const value = query.get('fieldValidation') ?? '';
  if (value === '') return 'Warn';
  if (value === 'Strict' || value === 'Warn' || value === 'Ignore') return value;
  throw new ApiError(
    400,
    'BadRequest',
    `fieldValidation must be one of "Ignore", "Warn" or "Strict", got ${JSON.stringify(value)}`,
  );
}

/**
 * The admission of one write to `type`, or undefined when the type has no schema. Warnings (Warn
 * mode) are pushed to `warnings` for the response's Warning headers.
 */
function admission(type: ServedType, mode: FieldValidation, warnings: string[]): Admit | undefined {
  const schema = type.schema as StructuralSchema | undefined;
  if (schema === undefined) return undefined;
  return (candidate, subresource) => {
    const { object, unknownFields } = coerce(schema, candidate);
    if (unknownFields.length > 0 && mode === 'Strict') {
      throw new ApiError(
        400,
        'BadRequest',
        strictDecodingMessage(type.kind, type.version, unknownFields),
      );
    }
    if (mode === 'Warn') warnings.push(...unknownFieldWarnings(unknownFields));
    // A main write keeps the stored status (the status subresource's business), so only the rest
    // is validated; a /status write changes only the status, so only it is.
    const checked = subresource === undefined && type.status ? withoutStatus(object) : object;
    const errors = validate(schema, checked, subresource === 'status' ? { subresource } : {});
    if (errors.length > 0) {
      const meta = object['metadata'] as { name?: unknown } | undefined;
      const name = typeof meta?.name === 'string' ? meta.name : '';
      const status = invalidStatus(type.kind, type.group, name, errors);
      throw new ApiError(422, 'Invalid', status.message, status.details);
    }
    return object;
  };
}

function withoutStatus(object: Record<string, unknown>): Record<string, unknown> {
  const { status: _ignored, ...rest } = object;
  return rest;
}

export { admission, fieldValidationOf };
