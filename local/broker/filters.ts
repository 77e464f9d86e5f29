/**
 * Trigger filters, as Knative Eventing evaluates them on a CloudEvent's attributes and
 * extensions (all as strings):
 *
 * - `spec.filter.attributes` (GA): every listed attribute must be present and equal; an empty
 *   value only asks for the attribute to be present.
 * - `spec.filters` (the new-trigger-filters feature): a list of filters that must all pass, each
 *   with exactly one dialect: `exact`, `prefix`, `suffix` (one attribute each), `all`, `any`
 *   (lists) or `not` (one filter). An empty filter passes. When `filters` is set, `filter` is
 *   ignored, as in Knative. CESQL (`cesql`) is refused when the manifests are loaded.
 *
 * Validation follows Knative's webhook (pkg/apis/eventing/v1/trigger_validation.go and
 * subscriptions_api_validation.go): attribute names are lowercase alphanumerics starting with a
 * letter, one dialect per filter, one attribute per exact/prefix/suffix.
 */
import { z } from 'zod';

/** A map keyed by attribute names; a bad name is reported at its own path. */
function keyedBy(pattern: RegExp, message: string) {
  return z.record(z.string(), z.string()).superRefine((map, ctx) => {
    for (const name of Object.keys(map)) {
      if (!pattern.test(name)) ctx.addIssue({ code: 'custom', path: [name], message });
    }
  });
}

const attributeMap = keyedBy(
  /^[a-z][a-z0-9]*$/,
  'attribute names must start with a letter and contain only lowercase letters and digits',
);

/** One entry of `spec.filters`, as written. */
interface FilterDocument {
  exact?: Record<string, string> | undefined;
  prefix?: Record<string, string> | undefined;
  suffix?: Record<string, string> | undefined;
  all?: FilterDocument[] | undefined;
  any?: FilterDocument[] | undefined;
  not?: FilterDocument | undefined;
  cesql?: string | undefined;
}

const singleAttribute = (dialect: 'exact' | 'prefix' | 'suffix') =>
  attributeMap
    .refine((map) => Object.keys(map).length <= 1, {
      message: `${dialect} takes one attribute: use all (or several filters) to combine more`,
    })
    .optional();

const filterDocument: z.ZodType<FilterDocument> = z.lazy(() =>
  z
    .strictObject({
      exact: singleAttribute('exact'),
      prefix: singleAttribute('prefix'),
      suffix: singleAttribute('suffix'),
      all: z.array(filterDocument).optional(),
      any: z.array(filterDocument).optional(),
      not: filterDocument.optional(),
      cesql: z.string().optional(),
    })
    .superRefine((doc, ctx) => {
      if (doc.cesql !== undefined) {
        ctx.addIssue({
          code: 'custom',
          path: ['cesql'],
          message:
            'CESQL expressions are not supported by the development broker: use exact, prefix, suffix, all, any or not',
        });
      }
      const dialects = dialectsOf(doc);
      if (dialects.length > 1) {
        ctx.addIssue({
          code: 'custom',
          message: `multiple dialects found (${dialects.join(', ')}): a filter can have only one dialect set`,
        });
      }
    }),
);

function dialectsOf(doc: FilterDocument): string[] {
  const found: string[] = [];
  for (const key of ['exact', 'prefix', 'suffix'] as const) {
    if (Object.keys(doc[key] ?? {}).length > 0) found.push(key);
  }
  if ((doc.all ?? []).length > 0) found.push('all');
  if ((doc.any ?? []).length > 0) found.push('any');
  if (doc.not !== undefined) found.push('not');
  if (doc.cesql !== undefined) found.push('cesql');
  return found;
}

/** A compiled filter. */
type EventFilter =
  | { readonly kind: 'pass' }
  | { readonly kind: 'attributes'; readonly attributes: Readonly<Record<string, string>> }
  | {
      readonly kind: 'exact' | 'prefix' | 'suffix';
      readonly attribute: string;
      readonly value: string;
    }
  | { readonly kind: 'all' | 'any'; readonly filters: readonly EventFilter[] }
  | { readonly kind: 'not'; readonly filter: EventFilter };

function compileDocument(doc: FilterDocument): EventFilter {
  for (const kind of ['exact', 'prefix', 'suffix'] as const) {
    const entry = Object.entries(doc[kind] ?? {})[0];
    if (entry !== undefined) return { kind, attribute: entry[0], value: entry[1] };
  }
  if ((doc.all ?? []).length > 0) return { kind: 'all', filters: doc.all!.map(compileDocument) };
  if ((doc.any ?? []).length > 0) return { kind: 'any', filters: doc.any!.map(compileDocument) };
  if (doc.not !== undefined) return { kind: 'not', filter: compileDocument(doc.not) };
  return { kind: 'pass' };
}

/** The filter a Trigger applies: `filters` when non-empty, else `filter.attributes`. */
function triggerFilter(
  filter: { attributes?: Readonly<Record<string, string>> | undefined } | undefined,
  filters: readonly FilterDocument[] | undefined,
): EventFilter {
  if (filters !== undefined && filters.length > 0) {
    return { kind: 'all', filters: filters.map(compileDocument) };
  }
  const attributes = filter?.attributes ?? {};
  return Object.keys(attributes).length === 0
    ? { kind: 'pass' }
    : { kind: 'attributes', attributes };
}

/** Whether an event whose attributes and extensions are `attributes` passes `filter`. */
function matchesFilter(
  filter: EventFilter,
  attributes: Readonly<Record<string, string | undefined>>,
): boolean {
  switch (filter.kind) {
    case 'pass':
      return true;
    case 'attributes':
      return Object.entries(filter.attributes).every(([name, wanted]) => {
        const value = attributes[name];
        return value !== undefined && (wanted === '' || value === wanted);
      });
    case 'exact':
      return attributes[filter.attribute] === filter.value;
    case 'prefix':
      return attributes[filter.attribute]?.startsWith(filter.value) ?? false;
    case 'suffix':
      return attributes[filter.attribute]?.endsWith(filter.value) ?? false;
    case 'all':
      return filter.filters.every((f) => matchesFilter(f, attributes));
    case 'any':
      return (
        filter.filters.length === 0 || filter.filters.some((f) => matchesFilter(f, attributes))
      );
    case 'not':
      return !matchesFilter(filter.filter, attributes);
  }
}

export { attributeMap, keyedBy, filterDocument, triggerFilter, matchesFilter };
export type { EventFilter, FilterDocument };
