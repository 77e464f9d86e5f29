/**
 * A kubeconfig for the development API server. JSON is valid YAML, so client-node and kubectl
 * read it as they read any kubeconfig. Over HTTPS the server's CA is written in
 * (certificate-authority-data): clients verify the server as they would a cluster's. Over plain
 * HTTP (a test's explicit choice) client-node needs insecure-skip-tls-verify before it connects.
 */

function kubeconfig(options: {
  server: string;
  token: string;
  /** PEM of the server's CA; required for an https server. */
  ca?: string | undefined;
  namespace?: string;
}): string {
  const name = 'edgeai-dev';
  const https = options.server.startsWith('https:');
  if (https && options.ca === undefined) throw new Error('an https server needs its CA');
  const cluster = https
    ? {
        server: options.server,
        'certificate-authority-data': Buffer.from(options.ca!).toString('base64'),
      }
    : { server: options.server, 'insecure-skip-tls-verify': true };
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
