import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  Store,
  matches,
  mergePatch,
  parseSelector,
  servedTypes,
} from '../../local/apiserver/index.js';
import type { ResourceType } from '../../local/apiserver/index.js';

const type = (plural: string): ResourceType => {
  const found = servedTypes.find((t) => t.plural === plural);
  if (found === undefined) throw new Error(plural);
  return found;
};
const jis = type('jointinferenceservices');
const ksvc = type('services');

describe('label selectors', () => {
  it.each([
    ['', { a: '1' }, true],
    ['a=1', { a: '1' }, true],
    ['a==1,b', { a: '1' }, false],
    ['a!=1', {}, true],
    ['a in (1, 2)', { a: '2' }, true],
    ['a notin (1,2),!b', { a: '3' }, true],
    ['!a', { a: '' }, false],
    ['edgeai.io/node=edge0', { 'edgeai.io/node': 'edge0' }, true],
  ])('%s on %o -> %s', (selector, labels, expected) => {
    expect(matches(parseSelector(selector), labels)).toBe(expected);
  });

  it.each(['a=(', 'a in b', '=x', 'a=b c'])('refuses %s', (selector) => {
    expect(() => parseSelector(selector)).toThrow(/invalid/);
  });
});

describe('merge patch (RFC 7386)', () => {
  it('follows the RFC examples', () => {
    expect(mergePatch({ a: 'b', c: { d: 'e', f: 'g' } }, { a: 'z', c: { f: null } })).toEqual({
      a: 'z',
      c: { d: 'e' },
    });
    expect(mergePatch({ a: ['b'] }, { a: 'c' })).toEqual({ a: 'c' });
    expect(mergePatch({ a: 'b' }, ['c'])).toEqual(['c']);
  });

  it('is idempotent: applying a patch twice equals applying it once', () => {
    const json = fc.jsonValue();
    fc.assert(
      fc.property(json, json, (target, patch) => {
        const once = mergePatch(target, patch);
        expect(mergePatch(once, patch)).toEqual(once);
      }),
    );
  });
});

describe('Store', () => {
  const owned = (name: string, ...owners: Array<{ uid: string; name: string }>) => ({
    metadata: {
      name,
      ownerReferences: owners.map((o) => ({
        apiVersion: 'edgeai.io/v1alpha1',
        kind: 'JointInferenceService',
        name: o.name,
        uid: o.uid,
      })),
    },
  });

  it('collects a dependent only when its last owner is gone, and cascades', () => {
    const store = new Store();
    const a = store.create(jis, 'ns', { metadata: { name: 'a' } });
    const b = store.create(jis, 'ns', { metadata: { name: 'b' } });
    const shared = store.create(ksvc, 'ns', owned('shared', a.metadata, b.metadata));
    store.create(ksvc, 'ns', owned('child', { uid: shared.metadata.uid, name: 'shared' }));
    store.delete(jis, 'ns', 'a', servedTypes);
    expect(store.list(ksvc, 'ns', []).map((o) => o.metadata.name)).toEqual(['child', 'shared']);
    expect(store.get(ksvc, 'ns', 'shared').metadata.ownerReferences).toHaveLength(1);
    store.delete(jis, 'ns', 'b', servedTypes);
    expect(store.list(ksvc, 'ns', [])).toEqual([]);
  });

  it('replays watch events after a revision and answers 410 for one too old', () => {
    const store = new Store();
    store.create(jis, 'ns', { metadata: { name: 'x' } });
    const after = store.revision;
    store.patch(jis, 'ns', 'x', { type: 'merge', body: { spec: { a: 1 } } });
    const seen: string[] = [];
    const stop = store.watch(after, (e) => seen.push(`${e.type}:${e.object.metadata.name}`));
    store.delete(jis, 'ns', 'x', servedTypes);
    stop();
    expect(seen).toEqual(['MODIFIED:x', 'DELETED:x']);
    expect(() => store.watch(-5, () => {})).toThrow(/too old resource version/);
  });

  it('survives a snapshot round trip', () => {
    const store = new Store();
    store.create(jis, 'ns', { metadata: { name: 'keep', labels: { a: 'b' } }, spec: { x: 1 } });
    const copy = new Store();
    copy.load(JSON.parse(JSON.stringify(store.dump())) as ReturnType<Store['dump']>, servedTypes);
    expect(copy.get(jis, 'ns', 'keep')).toEqual(store.get(jis, 'ns', 'keep'));
    expect(copy.revision).toBe(store.revision);
  });
});
