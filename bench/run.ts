/**
 * `npm run bench -- <name>` runs bench/<name>/index.ts, compiled by tsc like the shipped code
 * (not through a TypeScript loader, whose transforms would be measured too). Benchmarks print a
 * table and, as their very last line, one JSON object with figures and targets
 * (see bench/support/report.ts).
 */
import { existsSync, readdirSync } from 'node:fs';

const name = process.argv[2] ?? '';
const root = new URL('./', import.meta.url);
const names = readdirSync(root, { withFileTypes: true })
  .filter((e) => e.isDirectory() && existsSync(new URL(`${e.name}/index.js`, root)))
  .map((e) => e.name);
if (!names.includes(name)) {
  process.stderr.write(`usage: npm run bench -- <name>   (one of: ${names.join(', ')})\n`);
  process.exit(2);
}
const bench = (await import(new URL(`${name}/index.js`, root).href)) as {
  main(args: string[]): Promise<void>;
};
try {
  await bench.main(process.argv.slice(3));
} catch (err) {
  // A mistyped option is the caller's: say which, without a stack trace. Anything else is ours.
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string' || !code.startsWith('ERR_PARSE_ARGS')) throw err;
  process.stderr.write(`bench ${name}: ${(err as Error).message}\n`);
  process.exit(2);
}
