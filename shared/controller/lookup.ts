/** Listed objects as the kinds' inputs look them up: by name, and by namespace then name. */
import type { KubeObject } from '../k8s/index.js';

function byName(items: readonly KubeObject[]): Map<string, KubeObject> {
  return new Map(items.map((item) => [item.metadata.name, item]));
}

/** For a tick, which lists a kind across namespaces once. */
function byNamespace(items: readonly KubeObject[]): Map<string, Map<string, KubeObject>> {
  const groups = new Map<string, Map<string, KubeObject>>();
  for (const item of items) {
    const ns = item.metadata.namespace ?? '';
    let group = groups.get(ns);
    if (group === undefined) groups.set(ns, (group = new Map<string, KubeObject>()));
    group.set(item.metadata.name, item);
  }
  return groups;
}

export { byName, byNamespace };
