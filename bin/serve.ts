/**
 * Container entry point: serves the function named by FUNCTION_TARGET on PORT (the
 * functions-framework conventions) from `node:http` directly (shared/http/server.ts), crash-only
 * (shared/http/lifecycle.ts): SIGTERM, which Knative sends before it removes a pod, drains and
 * exits 0; an uncaught exception or unhandled rejection is logged, drains and exits 1.
 *
 * Everything but the types is imported when main() asks for it, not before this file runs: the
 * inference workers start their first onnxruntime thread before anything else loads, so that
 * the thread's start (a Node environment of its own, onnxruntime's native library) overlaps the
 * loading of the function's modules instead of following it.
 */
import type { FunctionFactory } from '../shared/http/index.js';

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
/**
 * Functions that serve an ONNX model from worker threads: their first thread starts, and loads
 * onnxruntime, while the function's own modules load (shared/inference/onnx-runtime.ts).
 */
const onnxServing = new Set(['cloud-infer', 'edge-infer']);
/** How long the requests in flight get to finish once draining starts. */
const drainTimeoutMs = 20_000;

async function main(): Promise<void> {
  // Only a hint, read before the config module has loaded: loadConfig below checks the target,
  // and a name outside the set just starts no thread early.
  if (onnxServing.has(process.env['FUNCTION_TARGET'] ?? '')) {
    (await import('../shared/inference/onnx-runtime.js')).prestartOnnxThread();
  }
  const [{ loadConfig }, { serveFunction }, { createTelemetry }] = await Promise.all([
    import('../shared/config/index.js'),
    import('../shared/http/index.js'),
    import('../shared/telemetry/index.js'),
  ]);
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
  serveFunction({
    definition: instance.definition,
    close: () => instance.close(),
    telemetry,
    port: config.port,
    bodyLimitBytes: config.bodyLimitBytes,
    readinessTimeoutMs: config.readinessTimeoutMs,
    drainTimeoutMs,
  });
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
