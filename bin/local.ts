/**
 * `npm run local [-- --snapshot <dir>] [--logs <service>]... [--port <n>] [--broker-port <n>]`:
 * the embedded stack kept running (local/up.ts) until Ctrl-C, SIGTERM or SIGHUP; a second
 * signal exits at once (the supervisor still kills its processes on exit).
 */
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { runLocal } from '../local/up.js';

const usage =
  'usage: npm run local -- [--snapshot <dir>] [--logs <service|all>]... [--port <n>] [--broker-port <n>]';

function port(value: string | undefined, flag: string): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535) {
    process.stderr.write(`${flag} must be a port 0-65535, got ${value}\n${usage}\n`);
    process.exit(2);
  }
  return n;
}

let values;
try {
  ({ values } = parseArgs({
    options: {
      snapshot: { type: 'string' },
      logs: { type: 'string', multiple: true },
      port: { type: 'string' },
      'broker-port': { type: 'string' },
    },
  }));
} catch (err) {
  process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n${usage}\n`);
  process.exit(2);
}

const root = new URL('../../', import.meta.url);
const interrupt = new AbortController();
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => {
    if (interrupt.signal.aborted) process.exit(130);
    console.log(`local: ${signal}, stopping every process it started`);
    interrupt.abort();
  });
}

const apiPort = port(values.port, '--port');
const brokerPort = port(values['broker-port'], '--broker-port');
try {
  await runLocal({
    root,
    bundle: fileURLToPath(new URL('dist/bundle/serve.mjs', root)),
    ...(process.env['REDIS_URL'] === undefined ? {} : { redisUrl: process.env['REDIS_URL'] }),
    ...(apiPort === undefined ? {} : { apiPort }),
    ...(brokerPort === undefined ? {} : { brokerPort }),
    ...(values.snapshot === undefined ? {} : { snapshot: values.snapshot }),
    follow: values.logs ?? [],
    say: (line) => console.log(line),
    signal: interrupt.signal,
  });
  process.exit(0);
} catch (err) {
  console.error(`local: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(interrupt.signal.aborted ? 130 : 1);
}
