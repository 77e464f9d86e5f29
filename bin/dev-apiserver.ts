/**
 * `npm run dev:apiserver -- --port <n> --kubeconfig <file> [--snapshot <file>]`: serves the
 * development API server on 127.0.0.1 over HTTPS (a CA and certificate made at start) and writes
 * a kubeconfig (mode 0600, the CA, a fresh token) that client-node and kubectl accept. With
 * --snapshot, state is loaded from and saved to that file.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import {
  Store,
  createDevApiServer,
  kubeconfig,
  listenDevApiServer,
  servedTypes,
} from '../local/apiserver/index.js';

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '0' },
    kubeconfig: { type: 'string' },
    snapshot: { type: 'string' },
  },
});
const port = Number(values.port);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  process.stderr.write(`--port must be 0-65535, got ${values.port}\n`);
  process.exit(2);
}
if (values.kubeconfig === undefined) {
  process.stderr.write('usage: dev-apiserver --port <n> --kubeconfig <file> [--snapshot <file>]\n');
  process.exit(2);
}

const store = new Store();
const snapshot = values.snapshot;
if (snapshot !== undefined && existsSync(snapshot)) {
  store.load(JSON.parse(readFileSync(snapshot, 'utf8')) as ReturnType<Store['dump']>, servedTypes);
}
const token = randomBytes(24).toString('base64url');
const dev = createDevApiServer({ token, store });
const listening = await listenDevApiServer(dev, port).catch((err: NodeJS.ErrnoException) => {
  process.stderr.write(
    err.code === 'EADDRINUSE'
      ? `port ${port} on 127.0.0.1 is in use: pick another with --port, or 0 for any free one\n`
      : `cannot listen on 127.0.0.1:${port}: ${err.message}\n`,
  );
  process.exit(1);
});
writeFileSync(values.kubeconfig, kubeconfig({ server: listening.url, token, ca: dev.ca }), {
  mode: 0o600,
});
process.stdout.write(`dev API server on ${listening.url}; kubeconfig ${values.kubeconfig}\n`);

const save = () => {
  if (snapshot !== undefined)
    writeFileSync(snapshot, JSON.stringify(store.dump()), { mode: 0o600 });
};
if (snapshot !== undefined) setInterval(save, 2000).unref();
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    save();
    void listening.close();
  });
}
