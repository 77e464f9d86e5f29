/** A stored-looking object for pure tests of the development API server's pieces. */
import type { KubeObject } from '../../local/apiserver/index.js';

export function kubeObject(
  kind: string,
  name: string,
  rest: Record<string, unknown> = {},
): KubeObject {
  const { metadata, ...fields } = rest;
  return {
    apiVersion: 'v1',
    kind,
    metadata: {
      name,
      namespace: 'default',
      uid: `uid-${name}`,
      resourceVersion: '7',
      generation: 1,
      creationTimestamp: '2026-03-01T12:00:00Z',
      ...(metadata as Record<string, unknown> | undefined),
    },
    ...fields,
  };
}
