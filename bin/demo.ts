/**
 * `make demo` (after `npm run bundle`): runs local/demo.ts on the embedded local stack and
 * prints what happens; `--verbose` also prints every process's and the Broker's lines. SIGINT,
 * SIGTERM or SIGHUP stops the demo and every process it started; a second one exits at once.
 */
import { fileURLToPath } from 'node:url';
import { runDemo } from '../local/demo.js';

const root = new URL('../../', import.meta.url);
const verbose = process.argv.includes('--verbose');
const interrupt = new AbortController();
const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
for (const signal of signals) {
  process.on(signal, () => {
    if (interrupt.signal.aborted) process.exit(130);
    console.error(`demo: ${signal}, stopping every process it started`);
    interrupt.abort();
  });
}

try {
  const result = await runDemo({
    root,
    bundle: fileURLToPath(new URL('dist/bundle/serve.mjs', root)),
    ...(process.env['REDIS_URL'] === undefined ? {} : { redisUrl: process.env['REDIS_URL'] }),
    say: (line) => console.log(line),
    ...(verbose ? { trace: (line: string) => console.log(`   ${line}`) } : {}),
    signal: interrupt.signal,
  });
  console.log(JSON.stringify({ demo: 'joint-inference', ...result }));
  process.exit(0);
} catch (err) {
  console.error(`demo failed: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(interrupt.signal.aborted ? 130 : 1);
}
