/**
 * A kubeconfig for the development API server. JSON is valid YAML, so client-node and kubectl
 * read it as they read any kubeconfig. The server's CA is written in
 * (certificate-authority-data): clients verify the server as they would a cluster's.
 */

function kubeconfig(options: {
  server: string;
  token: string;
  /** PEM of the server's CA. */
  ca: string;
  namespace?: string;
}): string {
  const name = 'edgeai-dev';
  const cluster = {
    server: options.server,
    'certificate-authority-data': Buffer.from(options.ca).toString('base64'),
  };
  return `${JSON.stringify(
    {
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name, cluster }],
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
