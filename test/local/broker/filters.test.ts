/** Trigger filters on CloudEvent attributes and extensions. */
import { describe, expect, it } from 'vitest';
import { loadEventing, matchesFilter } from '../../../local/broker/index.js';
import type { EventFilter } from '../../../local/broker/index.js';

const event = {
  specversion: '1.0',
  id: '1',
  type: 'io.edgeai.aset.stream.bound',
  source: '/apis/v1/namespaces/edgeai-system/pingsources/aset-scheduler',
  edgeaiwatch: 'sync',
};

function filterOf(spec: string): EventFilter {
  return loadEventing([
    `apiVersion: eventing.knative.dev/v1
kind: Trigger
metadata: { name: t }
spec:
  broker: default
  subscriber: { uri: 'http://example.test/' }
${spec}`,
  ]).triggers[0]!.filter;
}

describe('filter.attributes', () => {
  it('needs every attribute present and equal, extensions included', () => {
    const f = filterOf(
      '  filter: { attributes: { type: io.edgeai.aset.stream.bound, edgeaiwatch: sync } }',
    );
    expect(matchesFilter(f, event)).toBe(true);
    expect(matchesFilter(f, { ...event, edgeaiwatch: 'reconcile' })).toBe(false);
    const { edgeaiwatch: _, ...without } = event;
    expect(matchesFilter(f, without)).toBe(false);
  });

  it('takes an empty value as "present, any value", and no attributes as everything', () => {
    const f = filterOf("  filter: { attributes: { edgeaiwatch: '' } }");
    expect(matchesFilter(f, event)).toBe(true);
    expect(matchesFilter(f, { ...event, edgeaiwatch: undefined })).toBe(false);
    expect(matchesFilter(filterOf(''), event)).toBe(true);
    expect(matchesFilter(filterOf('  filter: {}'), event)).toBe(true);
  });
});

describe('filters dialects', () => {
  it('exact, prefix and suffix compare one attribute; a missing one never matches', () => {
    expect(matchesFilter(filterOf('  filters: [{ exact: { edgeaiwatch: sync } }]'), event)).toBe(
      true,
    );
    expect(matchesFilter(filterOf('  filters: [{ exact: { edgeaiwatch: syn } }]'), event)).toBe(
      false,
    );
    expect(
      matchesFilter(filterOf('  filters: [{ prefix: { type: io.edgeai.aset. } }]'), event),
    ).toBe(true);
    expect(matchesFilter(filterOf('  filters: [{ prefix: { type: io.edgeai.ml } }]'), event)).toBe(
      false,
    );
    expect(
      matchesFilter(filterOf('  filters: [{ suffix: { source: /aset-scheduler } }]'), event),
    ).toBe(true);
    expect(matchesFilter(filterOf('  filters: [{ suffix: { nothere: x } }]'), event)).toBe(false);
  });

  it('ANDs the list; all, any and not combine', () => {
    const f = filterOf(`  filters:
    - prefix: { type: io.edgeai. }
    - any:
        - suffix: { type: .bound }
        - suffix: { type: .rejected }
    - not: { exact: { edgeaiwatch: reconcile } }`);
    expect(matchesFilter(f, event)).toBe(true);
    expect(matchesFilter(f, { ...event, type: 'io.edgeai.aset.stream.rejected' })).toBe(true);
    expect(matchesFilter(f, { ...event, type: 'io.edgeai.aset.stream.ended' })).toBe(false);
    expect(matchesFilter(f, { ...event, edgeaiwatch: 'reconcile' })).toBe(false);
    const all = filterOf(`  filters:
    - all: [{ exact: { type: io.edgeai.aset.stream.bound } }, { exact: { id: '2' } }]`);
    expect(matchesFilter(all, event)).toBe(false);
    expect(matchesFilter(all, { ...event, id: '2' })).toBe(true);
  });

  it('ignores filter.attributes when filters is set, as Knative does', () => {
    const f = filterOf(`  filter: { attributes: { type: something.else } }
  filters: [{ exact: { edgeaiwatch: sync } }]`);
    expect(matchesFilter(f, event)).toBe(true);
  });
});
