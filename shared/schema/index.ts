/**
 * Boundary validation: every input is parsed with a zod schema once, at the edge of the process,
 * and the code inside trusts the typed result. zod also emits JSON Schema, which the CRDs reuse.
 */
import type { z } from 'zod';
import { ValidationError } from '../errors/index.js';

/** Joins a zod issue path into `a.b[2].c` so the message points at the exact field. */
function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`;
    else out += out === '' ? String(part) : `.${String(part)}`;
  }
  return out;
}

/** Names a field for a message: `label.path`, or whatever a label function makes of the path. */
type Label = string | ((path: string) => string);

/** One line per problem, each prefixed by the field it concerns (`label` names the root). */
function describeIssues(issues: readonly z.core.$ZodIssue[], label: Label): string {
  return issues
    .map((issue) => {
      const path = formatPath(issue.path);
      const where =
        typeof label === 'function' ? label(path) : path === '' ? label : `${label}.${path}`;
      return `${where}: ${issue.message}`;
    })
    .join('; ');
}

/**
 * Parses `input` or throws a ValidationError naming every bad field under `label`
 * (e.g. `data.inferenceNumber: Invalid input: expected number, received string`).
 */
function parseInput<S extends z.ZodType>(schema: S, input: unknown, label: Label): z.output<S> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  throw new ValidationError(describeIssues(result.error.issues, label));
}

export { parseInput, describeIssues };
