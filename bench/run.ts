/**
 * `npm run bench -- <name>` runs bench/<name>/index.ts or research/bench/<name>/index.ts (the
 * ASET research benches, research/README.md), compiled by tsc like the shipped code (not through
 * a TypeScript loader, whose transforms would be measured too). Benchmarks print a table and, as
 * their very last line, one JSON object with figures and targets (see bench/support/report.ts).
 */
import { existsSync, readdirSync } from 'node:fs';

const name = process.argv[2] ?? '';
// dist/bench/ and dist/research/bench/; a research bench wins over a stale dist/bench/ copy.
const roots = [new URL('./', import.meta.url), new URL('../research/bench/', import.meta.url)];
const benches = new Map<string, URL>();
for (const root of roots.filter((dir) => existsSync(dir))) {
  for (const e of readdirSync(root, { withFileTypes: true })) {
    const entry = new URL(`${e.name}/index.js`, root);
    if (e.isDirectory() && existsSync(entry)) benches.set(e.name, entry);
  }
}
const entry = benches.get(name);
if (entry === undefined) {
  const names = [...benches.keys()].sort();
  process.stderr.write(`usage: npm run bench -- <name>   (one of: ${names.join(', ')})\n`);
  process.exit(2);
}
const bench = (await import(entry.href)) as {
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
