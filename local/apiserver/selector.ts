/**
 * Kubernetes label selectors (the `labelSelector` query parameter): equality (`a=b`, `a==b`,
 * `a!=b`), set (`a in (x,y)`, `a notin (x)`) and existence (`a`, `!a`) requirements, ANDed.
 */

type Requirement =
  | { key: string; op: 'in' | 'notin'; values: readonly string[] }
  | { key: string; op: 'exists' | 'absent' };

const keyPattern =
  /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const valuePattern = /^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$/;

/** Splits on commas that are not inside a parenthesised value set. */
function splitTerms(selector: string): string[] {
  const terms: string[] = [];
  let depth = 0;
  let current = '';
  for (const char of selector) {
    if (char === '(') depth++;
    if (char === ')') depth--;
    if (char === ',' && depth === 0) {
      terms.push(current);
      current = '';
    } else {
      current += char;
    }
  }
  terms.push(current);
  return terms.map((t) => t.trim()).filter((t) => t !== '');
}

function checkKey(key: string): string {
  if (!keyPattern.test(key)) throw new Error(`invalid label key ${JSON.stringify(key)}`);
  return key;
}

function checkValue(value: string): string {
  if (!valuePattern.test(value)) throw new Error(`invalid label value ${JSON.stringify(value)}`);
  return value;
}

/** Parses a selector; throws an Error naming the bad term. */
function parseSelector(selector: string): Requirement[] {
  return splitTerms(selector).map((term): Requirement => {
    const set = /^(\S+)\s+(in|notin)\s+\(([^)]*)\)$/.exec(term);
    if (set) {
      const values = set[3]!.split(',').map((v) => checkValue(v.trim()));
      return { key: checkKey(set[1]!), op: set[2] as 'in' | 'notin', values };
    }
    const equality = /^([^!=\s]+)\s*(==|=|!=)\s*(\S*)$/.exec(term);
    if (equality) {
      const op = equality[2] === '!=' ? 'notin' : 'in';
      return { key: checkKey(equality[1]!), op, values: [checkValue(equality[3]!)] };
    }
    if (term.startsWith('!')) return { key: checkKey(term.slice(1).trim()), op: 'absent' };
    if (keyPattern.test(term)) return { key: term, op: 'exists' };
    throw new Error(`invalid selector term ${JSON.stringify(term)}`);
  });
}

/** Whether `labels` satisfy every requirement (an empty selector matches everything). */
function matches(
  requirements: readonly Requirement[],
  labels: Readonly<Record<string, string>>,
): boolean {
  return requirements.every((r) => {
    const has = Object.hasOwn(labels, r.key);
    switch (r.op) {
      case 'exists':
        return has;
      case 'absent':
        return !has;
      case 'in':
        return has && r.values.includes(labels[r.key]!);
      case 'notin':
        return !has || !r.values.includes(labels[r.key]!);
    }
  });
}

export { parseSelector, matches };
export type { Requirement };
