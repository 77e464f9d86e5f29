/**
 * Container entry point: serves the function named by FUNCTION_TARGET on PORT (the
 * functions-framework conventions), and drains in-flight requests on SIGTERM, which Knative
 * sends before it removes a pod.
 */
import { existsSync, readdirSync } from 'node:fs';
import type { Server } from 'node:http';
import { loadConfig } from '../shared/config/index.js';
import type { RuntimeConfig } from '../shared/config/index.js';
import { buildServer } from '../shared/http/index.js';
import type { FunctionDefinition } from '../shared/http/index.js';
import { createTelemetry } from '../shared/telemetry/index.js';
import type { Telemetry } from '../shared/telemetry/index.js';

/** What every `functions/<name>/index.ts` default-exports. */
export type FunctionFactory = (runtime: {
  config: RuntimeConfig;
  telemetry: Telemetry;
}) => Promise<{
  definition: FunctionDefinition;
  close(): Promise<void>;
}>;

const functionsDir = new URL('../functions/', import.meta.url);
const drainMs = 20_000;

function available(): string[] {
  if (!existsSync(functionsDir)) return [];
  return readdirSync(functionsDir, { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => entry.name);
}

async function main(): Promise<void> {
  const config = loadConfig();
  const target = config.functionTarget;
  const names = available();
  if (target === undefined || !names.includes(target)) {
    throw new Error(
      `FUNCTION_TARGET must name one of: ${names.join(', ') || '(no functions built)'}; got ${target ?? 'nothing'}`,
    );
  }
  const telemetry = createTelemetry({ functionName: target, level: config.logLevel });
  const module = (await import(new URL(`${target}/index.js`, functionsDir).href)) as {
    default: FunctionFactory;
  };
  const instance = await module.default({ config, telemetry });
  const server: Server = buildServer(instance.definition, {
    telemetry,
    bodyLimitBytes: config.bodyLimitBytes,
    readinessTimeoutMs: config.readinessTimeoutMs,
  });
  server.listen(config.port, () => telemetry.log.info({ port: config.port }, 'serving'));

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
