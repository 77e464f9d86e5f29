/**
 * A kubeconfig for the development API server. JSON is valid YAML, so client-node and kubectl
 * read it as they read any kubeconfig. The server speaks plain HTTP on loopback only, which
 * client-node accepts only with insecure-skip-tls-verify set.
 */

function kubeconfig(options: { server: string; token: string; namespace?: string }): string {
  const name = 'edgeai-dev';
  return `${JSON.stringify(
    {
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name, cluster: { server: options.server, 'insecure-skip-tls-verify': true } }],
      users: [{ name, user: { token: options.token } }],
      contexts: [
        { name, context: { cluster: name, user: name, namespace: options.namespace ?? 'default' } },
      ],
      'current-context': name,
    },
    null,
    2,
  )}\n`;
}

export { kubeconfig };
