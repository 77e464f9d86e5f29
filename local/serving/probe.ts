/**
 * One readiness probe of a local container, as the kubelet runs it: `httpGet` succeeds on a
 * status from 200 to 399, `tcpSocket` on a connection; without either, an HTTP GET of
 * /health/readiness (what every function serves). Knative probes the container's own port
 * whatever the probe says, and so does this: the port is the one the process was given.
 */
import { request } from 'node:http';
import { connect } from 'node:net';
import type { Probe } from './types.js';

const defaultPath = '/health/readiness';

function probeOnce(port: number, probe: Probe | undefined): Promise<boolean> {
  const timeoutMs = (probe?.timeoutSeconds ?? 1) * 1000;
  if (probe?.tcpSocket !== undefined && probe.httpGet === undefined) {
    return new Promise((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.setTimeout(timeoutMs, () => socket.destroy());
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
      socket.once('close', () => resolve(false));
    });
  }
  const path = probe?.httpGet?.path ?? defaultPath;
  const headers = Object.fromEntries(
    (probe?.httpGet?.httpHeaders ?? []).map((header) => [header.name, header.value]),
  );
  return new Promise((resolve) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path: path.startsWith('/') ? path : `/${path}`,
        headers: { 'user-agent': 'kube-probe/edgeai-dev', ...headers },
        agent: false,
        timeout: timeoutMs,
      },
      (res) => {
        res.resume();
        const code = res.statusCode ?? 0;
        resolve(code >= 200 && code < 400);
      },
    );
    req.once('timeout', () => req.destroy());
    req.once('error', () => resolve(false));
    req.end();
  });
}

export { probeOnce };
