/**
 * Container entry point: serves the function named by FUNCTION_TARGET on PORT (the
 * functions-framework conventions), and drains in-flight requests on SIGTERM, which Knative
 * sends before it removes a pod.
 */
import type { Server } from 'node:http';
import { loadConfig } from '../shared/config/index.js';
import { buildServer } from '../shared/http/index.js';
import type { FunctionFactory } from '../shared/http/index.js';
import { createTelemetry } from '../shared/telemetry/index.js';

/**
 * Every function, each loaded only when it is the target: a container pays the start-up cost of
 * its own function's modules alone. Imports by literal path, so a bundler can follow them.
 */
const functions: Readonly<Record<string, () => Promise<{ default: FunctionFactory }>>> = {
  'aset-scheduler': () => import('../functions/aset-scheduler/index.js'),
  'cloud-infer': () => import('../functions/cloud-infer/index.js'),
  'downstream-sync': () => import('../functions/downstream-sync/index.js'),
  'edge-infer': () => import('../functions/edge-infer/index.js'),
  'fl-aggregator': () => import('../functions/fl-aggregator/index.js'),
  'fl-trainer': () => import('../functions/fl-trainer/index.js'),
  joiner: () => import('../functions/joiner/index.js'),
  'reconcile-tick': () => import('../functions/reconcile-tick/index.js'),
  router: () => import('../functions/router/index.js'),
  'upstream-status': () => import('../functions/upstream-status/index.js'),
};
const drainMs = 20_000;

async function main(): Promise<void> {
  const config = loadConfig();
  const target = config.functionTarget;
  // hasOwn: a name such as "toString" must not reach Object.prototype.
  const load =
    target !== undefined && Object.hasOwn(functions, target) ? functions[target] : undefined;
  if (target === undefined || load === undefined) {
    throw new Error(
      `FUNCTION_TARGET must name one of: ${Object.keys(functions).join(', ')}; got ${target ?? 'nothing'}`,
    );
  }
  const telemetry = createTelemetry({ functionName: target, level: config.logLevel });
  const instance = await (await load()).default({ config, telemetry });
  const server: Server = buildServer(instance.definition, {
    telemetry,
    bodyLimitBytes: config.bodyLimitBytes,
    readinessTimeoutMs: config.readinessTimeoutMs,
  });
  server.listen(config.port, () => {
    const address = server.address();
    const port = typeof address === 'object' && address !== null ? address.port : config.port;
    telemetry.log.info({ port }, 'serving');
  });

  const stop = (signal: string) => {
    telemetry.log.info({ signal }, 'draining');
    const force = setTimeout(() => process.exit(1), drainMs).unref();
    server.close(() => {
      instance.close().then(
        () => {
          clearTimeout(force);
          process.exit(0);
        },
        (err: unknown) => {
          telemetry.log.error({ err }, 'close failed');
          process.exit(1);
        },
      );
    });
    server.closeIdleConnections();
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
