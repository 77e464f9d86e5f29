/**
 * The patch types the development API server serves, as kube-apiserver applies them: JSON merge
 * patch (RFC 7386) for every kind, JSON patch (RFC 6902) for every kind, and strategic merge patch
 * for the built-in kinds only (custom resources have no patch strategies, as in Kubernetes).
 * Server-side apply (application/apply-patch+yaml) is not served.
 */

type PatchType = 'merge' | 'json' | 'strategic';

/** A patch that cannot apply: 400 when it is malformed, 422 when it does not fit the object. */
class PatchError extends Error {
  constructor(
    readonly code: 400 | 422,
    message: string,
  ) {
    super(message);
  }
}

const mediaTypes: Readonly<Record<string, PatchType>> = {
  'application/merge-patch+json': 'merge',
  'application/json-patch+json': 'json',
  'application/strategic-merge-patch+json': 'strategic',
};

/** The patch type of a Content-Type header, or undefined when it is not one we serve. */
function patchTypeOf(contentType: string): PatchType | undefined {
  return mediaTypes[contentType.split(';')[0]!.trim().toLowerCase()];
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** RFC 7386 JSON merge patch: objects merge, null deletes, anything else replaces. */
function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isRecord(patch)) return patch;
  const result: Record<string, unknown> = isRecord(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete result[key];
    else result[key] = mergePatch(result[key], value);
  }
  return result;
}

/**
 * Strategic merge patch on the kinds we serve (Node, Secret, Event): their maps merge as in a
 * merge patch, and lists are replaced. The directives kubectl sends for ordering
 * (`$setElementOrder/<list>`) and `$retainKeys` only matter to lists with a merge key, which
 * these patches replace whole, so they are dropped; any other directive is refused by name
 * rather than half-applied.
 */
function strategicMergePatch(target: unknown, patch: unknown): unknown {
  if (!isRecord(patch)) return patch;
  const result: Record<string, unknown> = isRecord(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (key.startsWith('$setElementOrder/') || key === '$retainKeys') continue;
    if (key.startsWith('$')) {
      throw new PatchError(400, `strategic merge patch directive ${key} is not served`);
    }
    if (value === null) delete result[key];
    else result[key] = strategicMergePatch(result[key], value);
  }
  return result;
}

/** RFC 6901: "/a/b~1c/0" → ["a", "b/c", "0"]. */
function pointer(path: unknown): string[] {
  if (typeof path !== 'string' || (path !== '' && !path.startsWith('/'))) {
    throw new PatchError(400, `invalid JSON pointer ${JSON.stringify(path)}`);
  }
  return path === ''
    ? []
    : path
        .slice(1)
        .split('/')
        .map((p) => p.replaceAll('~1', '/').replaceAll('~0', '~'));
}

/** The container holding the last token of `tokens`, and that token. */
function parentOf(document: unknown, tokens: readonly string[], path: string) {
  let node = document;
  for (const token of tokens.slice(0, -1)) {
    const next: unknown = Array.isArray(node)
      ? node[Number(token)]
      : isRecord(node)
        ? node[token]
        : undefined;
    if (next === undefined) throw new PatchError(422, `path ${path} does not exist`);
    node = next;
  }
  if (!Array.isArray(node) && !isRecord(node))
    throw new PatchError(422, `path ${path} does not exist`);
  return { container: node, key: tokens[tokens.length - 1]! };
}

function arrayIndex(list: unknown[], key: string, path: string, forInsert: boolean): number {
  if (forInsert && key === '-') return list.length;
  const index = Number(key);
  const limit = forInsert ? list.length : list.length - 1;
  if (!/^(0|[1-9]\d*)$/.test(key) || index > limit)
    throw new PatchError(422, `index ${key} is out of range at ${path}`);
  return index;
}

function read(document: unknown, path: string): unknown {
  if (path === '') return document;
  const { container, key } = parentOf(document, pointer(path), path);
  const value: unknown = Array.isArray(container)
    ? (container[arrayIndex(container, key, path, false)] as unknown)
    : container[key];
  if (value === undefined) throw new PatchError(422, `path ${path} does not exist`);
  return value;
}

function remove(document: unknown, path: string): unknown {
  const { container, key } = parentOf(document, pointer(path), path);
  if (Array.isArray(container)) {
    return container.splice(arrayIndex(container, key, path, false), 1)[0] as unknown;
  }
  if (!(key in container)) throw new PatchError(422, `path ${path} does not exist`);
  const value = container[key];
  delete container[key];
  return value;
}

function add(document: unknown, path: string, value: unknown): unknown {
  if (path === '') return value;
  const { container, key } = parentOf(document, pointer(path), path);
  if (Array.isArray(container)) container.splice(arrayIndex(container, key, path, true), 0, value);
  else container[key] = value;
  return document;
}

/** RFC 6902 JSON patch, applied to a copy: all operations or none. */
function jsonPatch(target: unknown, patch: unknown): unknown {
  if (!Array.isArray(patch)) throw new PatchError(400, 'a JSON patch must be an array');
  let document = structuredClone(target);
  for (const [i, operation] of patch.entries()) {
    if (!isRecord(operation)) throw new PatchError(400, `operation ${i} is not an object`);
    const { op, path, from, value } = operation;
    const where = String(path);
    switch (op) {
      case 'add':
        document = add(document, where, structuredClone(value));
        break;
      case 'remove':
        remove(document, where);
        break;
      case 'replace':
        read(document, where);
        document = where === '' ? structuredClone(value) : document;
        if (where !== '') {
          remove(document, where);
          add(document, where, structuredClone(value));
        }
        break;
      case 'move':
        document = add(document, where, remove(document, String(from)));
        break;
      case 'copy':
        document = add(document, where, structuredClone(read(document, String(from))));
        break;
      case 'test':
        if (JSON.stringify(read(document, where)) !== JSON.stringify(value))
          throw new PatchError(422, `test operation ${i} failed at ${where}`);
        break;
      default:
        throw new PatchError(400, `operation ${i}: unknown op ${JSON.stringify(op)}`);
    }
  }
  return document;
}

/** Applies a patch of `type` to a copy of `target`. */
function applyPatch(type: PatchType, target: unknown, patch: unknown): unknown {
  if (type === 'json') return jsonPatch(target, patch);
  if (!isRecord(patch)) throw new PatchError(400, 'a merge patch must be a JSON object');
  return type === 'merge'
    ? mergePatch(structuredClone(target), patch)
    : strategicMergePatch(structuredClone(target), patch);
}

export { PatchError, applyPatch, mergePatch, patchTypeOf };
export type { PatchType };
