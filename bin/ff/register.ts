/**
 * What every functions-framework entry (bin/ff/<name>.ts) does: builds the function from the
 * environment, as bin/serve.ts does, and registers it with functions-framework under its name,
 * so that the stock CLI serves it:
 *
 *   npm run build
 *   npx functions-framework --target=<name> --source=dist/bin/ff/<name>.js
 *
 * The CLI owns that process (its server, its signals, its error handling); the container image
 * serves through bin/serve.ts instead.
 */
import { loadConfig } from '../../shared/config/index.js';
import { registerFunction } from '../../shared/http/framework.js';
import type { FunctionFactory } from '../../shared/http/index.js';
import { createTelemetry } from '../../shared/telemetry/index.js';

/** Builds the function and registers it under `name`, the CLI's --target. */
async function registerWithFramework(name: string, factory: FunctionFactory): Promise<void> {
  const config = loadConfig();
  const telemetry = createTelemetry({ functionName: name, level: config.logLevel });
  const { definition } = await factory({ config, telemetry });
  if (definition.name !== name) {
    throw new Error(`bin/ff/${name}: the function it loads is named ${definition.name}`);
  }
  registerFunction(definition, {
    telemetry,
    bodyLimitBytes: config.bodyLimitBytes,
    readinessTimeoutMs: config.readinessTimeoutMs,
  });
}

export { registerWithFramework };
