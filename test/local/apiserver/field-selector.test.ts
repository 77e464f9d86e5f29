/**
 * Field selectors as kube-apiserver takes them: apimachinery's parser and escaping (its
 * selector_test.go cases, on fields kube lets an Event select), each kind's selectable fields,
 * and kube's 400 for anything else.
 */
import { describe, expect, it } from 'vitest';
import {
  FieldSelectorError,
  matchesFields,
  parseFieldSelector,
} from '../../../local/apiserver/field-selector.js';
import { ApiError } from '../../../local/apiserver/store.js';
import type { KubeObject } from '../../../local/apiserver/store.js';
import { kubeObject } from '../../support/kube-objects.js';

const event = { group: '', kind: 'Event', namespaced: true };
const node = { group: '', kind: 'Node', namespaced: false };
const secret = { group: '', kind: 'Secret', namespaced: true };
const jis = { group: 'edgeai.io', kind: 'JointInferenceService', namespaced: true };

const object = kubeObject;

/** The error a selector is refused with. */
function refusal(selector: string, type = event): FieldSelectorError {
  try {
    parseFieldSelector(selector, type);
  } catch (err) {
    if (err instanceof FieldSelectorError) return err;
    throw err;
  }
  throw new Error(`${selector} was not refused`);
}

function matches(selector: string, o: KubeObject, type = event): boolean {
  return matchesFields(parseFieldSelector(selector, type), type, o);
}

describe('parseFieldSelector', () => {
  it('parses what kubectl describe sends, sorted as kube sorts terms', () => {
    expect(
      parseFieldSelector(
        'involvedObject.name=jis-a,involvedObject.namespace=default,involvedObject.uid=u1,involvedObject.kind=JointInferenceService',
        event,
      ),
    ).toEqual([
      { field: 'involvedObject.kind', op: '=', value: 'JointInferenceService' },
      { field: 'involvedObject.name', op: '=', value: 'jis-a' },
      { field: 'involvedObject.namespace', op: '=', value: 'default' },
      { field: 'involvedObject.uid', op: '=', value: 'u1' },
    ]);
  });

  it('takes =, == and !=, and skips empty terms', () => {
    expect(parseFieldSelector('reason==a,,type!=b,', event)).toEqual([
      { field: 'reason', op: '=', value: 'a' },
      { field: 'type', op: '!=', value: 'b' },
    ]);
    expect(parseFieldSelector('', event)).toEqual([]);
    expect(parseFieldSelector('reason=', event)).toEqual([{ field: 'reason', op: '=', value: '' }]);
  });

  // selector_test.go TestSelectorParse, with x, y, z as reason, type, source.
  it.each([
    ['reason=a,type=b,source=c', ['a', 'c', 'b']],
    ['reason!=a,type=b', ['a', 'b']],
    ['reason=a||type\\=b', ['a||type=b']],
    ['reason=a\\=\\=b', ['a==b']],
    ['reason=수', ['수']],
  ])('parses %s', (selector, values) => {
    expect(parseFieldSelector(selector, event).map((r) => r.value)).toEqual(values);
  });

  it.each([
    ['reason=a||type=b', 'invalid field selector: unescaped character in value: 61'],
    ['reason==a==b', 'invalid field selector: unescaped character in value: 61'],
    ['reason=a,b', "invalid selector: 'reason=a,b'; can't understand 'b'"],
    ['reason in (a)', "invalid selector: 'reason in (a)'; can't understand 'reason in (a)'"],
    ['reason in (a,b,c)', "invalid selector: 'reason in (a,b,c)'; can't understand 'b'"],
    ['reason', "invalid selector: 'reason'; can't understand 'reason'"],
  ])('refuses %s', (selector, message) => {
    expect(refusal(selector).message).toBe(message);
  });

  // selector_test.go TestEscapeValue: escaped values and what they stand for.
  it.each([
    ['', ''],
    ['a', 'a'],
    ['\\=', '='],
    ['\\,', ','],
    ['\\\\', '\\'],
    ['\\\\\\=\\\\\\,\\\\', '\\=\\,\\'],
  ])('unescapes %s', (escaped, value) => {
    expect(parseFieldSelector(`reason=${escaped}`, event)).toEqual([
      { field: 'reason', op: '=', value },
    ]);
  });

  it.each([
    ['\\', '\\'],
    ['\\\\\\', '\\'],
    ['\\a', '\\a'],
  ])('refuses the invalid escape in %s', (escaped, sequence) => {
    expect(refusal(`reason=${escaped}`).message).toBe(
      `invalid field selector: invalid escape sequence: ${sequence}`,
    );
  });

  it('keeps an escaped comma in its term (TestSplitTerms)', () => {
    expect(parseFieldSelector('reason=\\,,type=v2', event).map((r) => r.value)).toEqual([
      ',',
      'v2',
    ]);
    expect(parseFieldSelector('reason=\\\\,type=v2', event).map((r) => r.value)).toEqual([
      '\\',
      'v2',
    ]);
    expect(parseFieldSelector('reason=\\\\\\,,type=v2', event).map((r) => r.value)).toEqual([
      '\\,',
      'v2',
    ]);
  });

  it("refuses a field the kind cannot select on, with kube's 400", () => {
    const error = refusal('spec.foo=bar', jis);
    expect(error).toBeInstanceOf(ApiError);
    expect(error).toMatchObject({
      code: 400,
      reason: 'BadRequest',
      message: 'field label not supported: spec.foo',
    });
    expect(refusal('metadata.namespace=default', node).message).toBe(
      'field label not supported: metadata.namespace',
    );
    expect(refusal('status.phase=Running', secret).message).toBe(
      'field label not supported: status.phase',
    );
  });

  it('checks syntax of every term before any field, in sorted order', () => {
    expect(refusal('spec.b=1,spec.a=2', jis).message).toBe('field label not supported: spec.a');
    expect(refusal('spec.foo=1,bad', jis).message).toBe(
      "invalid selector: 'spec.foo=1,bad'; can't understand 'bad'",
    );
  });

  it("takes each kind's selectable fields", () => {
    const fields = (type: typeof event, selector: string) =>
      parseFieldSelector(selector, type).map((r) => r.field);
    expect(fields(node, 'metadata.name=a,spec.unschedulable=true')).toHaveLength(2);
    expect(fields(secret, 'metadata.name=a,metadata.namespace=b,type=Opaque')).toHaveLength(3);
    expect(fields(jis, 'metadata.name=a,metadata.namespace=b')).toHaveLength(2);
    expect(
      fields(
        event,
        'involvedObject.apiVersion=v1,involvedObject.resourceVersion=1,involvedObject.fieldPath=f,reportingComponent=c,source=s,metadata.name=n,metadata.namespace=ns',
      ),
    ).toHaveLength(7);
  });
});

describe('matchesFields', () => {
  const scaled = object('Event', 'jis-a.1', {
    involvedObject: {
      kind: 'JointInferenceService',
      namespace: 'default',
      name: 'jis-a',
      uid: 'u1',
      fieldPath: '=value\\,\\',
    },
    reason: 'Scaled',
    type: 'Normal',
    reportingComponent: 'edgeai-controller',
  });

  it("matches kubectl describe's selector on the involved object", () => {
    const describe =
      'involvedObject.name=jis-a,involvedObject.namespace=default,involvedObject.uid=u1';
    expect(matches(describe, scaled)).toBe(true);
    expect(matches(`${describe},involvedObject.kind=JointInferenceService`, scaled)).toBe(true);
    expect(matches('involvedObject.uid=u2', scaled)).toBe(false);
    expect(matches('involvedObject.kind=Model', scaled)).toBe(false);
  });

  // selector_test.go TestSelectorMatches, on an Event's fields.
  it.each([
    ['', true],
    ['reason=Scaled', true],
    ['reason=Scaled,type=Normal', true],
    ['reason!=Other,type!=Warning', true],
    ['reason=Other', false],
    ['reason=Scaled,type=Warning', false],
    ['reason!=Scaled,type!=Warning', false],
    ['reason=Scaled,type=Normal,involvedObject.fieldPath=\\=value\\\\\\,\\\\', true],
    ['reason=Scaled,involvedObject.apiVersion=v1,type=Normal', false],
  ])('%s matches: %s', (selector, expected) => {
    expect(matches(selector, scaled)).toBe(expected);
  });

  it('reads an absent field as empty, and source from the reporting component', () => {
    expect(matches('involvedObject.apiVersion=', scaled)).toBe(true);
    expect(matches('source=edgeai-controller', scaled)).toBe(true);
    const old = object('Event', 'e', { source: { component: 'kubelet' } });
    expect(matches('source=kubelet,reportingComponent=', old)).toBe(true);
  });

  it('matches metadata.name, as kubectl get -w <name> selects', () => {
    const o = object('JointInferenceService', 'jis-a');
    expect(matches('metadata.name=jis-a', o, jis)).toBe(true);
    expect(matches('metadata.name=jis-b', o, jis)).toBe(false);
    expect(matches('metadata.namespace=default', o, jis)).toBe(true);
  });

  it("matches a Node's spec.unschedulable as true or false", () => {
    const cordoned = { ...object('Node', 'edge-1'), spec: { unschedulable: true } };
    const plain = object('Node', 'edge-2');
    expect(matches('spec.unschedulable=true', cordoned, node)).toBe(true);
    expect(matches('spec.unschedulable=false', plain, node)).toBe(true);
    expect(matches('spec.unschedulable!=true', plain, node)).toBe(true);
    expect(matches('spec.unschedulable=true', plain, node)).toBe(false);
  });

  it("matches a Secret's type", () => {
    const tls = object('Secret', 's', { type: 'kubernetes.io/tls' });
    expect(matches('type=kubernetes.io/tls', tls, secret)).toBe(true);
    expect(matches('type=Opaque', tls, secret)).toBe(false);
  });
});
