/**
 * `make demo` (after `npm run bundle`): runs shared/local/demo.ts on the embedded local stack and
 * prints what happens; `--verbose` also prints every process's and the Broker's lines.
 */
import { fileURLToPath } from 'node:url';
import { runDemo } from '../shared/local/demo.js';

const root = new URL('../../', import.meta.url);
const verbose = process.argv.includes('--verbose');

try {
  const result = await runDemo({
    root,
    bundle: fileURLToPath(new URL('dist/bundle/serve.mjs', root)),
    ...(process.env['REDIS_URL'] === undefined ? {} : { redisUrl: process.env['REDIS_URL'] }),
    say: (line) => console.log(line),
    ...(verbose ? { trace: (line: string) => console.log(`   ${line}`) } : {}),
  });
  console.log(JSON.stringify({ demo: 'joint-inference', ...result }));
  process.exit(0);
} catch (err) {
  console.error(`demo failed: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
}
