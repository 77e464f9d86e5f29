/**
 * The generator of the modules that hold the .lua files (shared/redis/scripts.ts): each `lua/`
 * folder's index.ts, rendered from its .lua files, must be the committed one. `npm run lua` runs
 * this test with --update, which writes them (a vitest file snapshot).
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { format, resolveConfig } from 'prettier';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../../', import.meta.url));

/** Every `lua/` folder under shared/ and bench/, '/'-separated from the root. */
function luaFolders(): string[] {
  return ['shared', 'bench'].flatMap((top) =>
    readdirSync(path.join(root, top), { recursive: true, encoding: 'utf8' })
      .map((entry) => path.posix.join(top, entry.split(path.sep).join('/')))
      .filter((dir) => path.posix.basename(dir) === 'lua')
      .filter((dir) => statSync(path.join(root, dir)).isDirectory())
      .sort(),
  );
}

/** `text` with each `--- @include "<file>"` line replaced by that file (relative, no .lua). */
function resolveIncludes(dir: string, text: string, from: readonly string[] = []): string {
  return text.replace(/^--- @include "([^"]+)"$/gm, (_line, include: string) => {
    const file = path.posix.join(dir, `${include}.lua`);
    if (from.includes(file)) throw new Error(`${file} includes itself`);
    const included = readFileSync(path.join(root, file), 'utf8').replace(/\n$/, '');
    return resolveIncludes(path.posix.dirname(file), included, [...from, file]);
  });
}

/** Inside a template literal. */
const escaped = (text: string) => text.replace(/[\\`]|\$\{/g, (c) => `\\${c}`);

/** The module of one `lua/` folder: each .lua file (includes/ are parts) as a luaFile. */
function render(folder: string): string {
  const domain = path.posix.dirname(folder).replace(/^shared\//, '');
  const runtime = path.posix.relative(folder, 'shared/redis/scripts.js');
  const scripts = readdirSync(path.join(root, folder))
    .filter((file) => file.endsWith('.lua'))
    .sort()
    .map((file) => {
      const name = file.slice(0, -'.lua'.length);
      const lua = resolveIncludes(folder, readFileSync(path.join(root, folder, file), 'utf8'));
      const id = name.replace(/-(\w)/g, (_, c: string) => c.toUpperCase());
      return `/** ${file} */\nexport const ${id} = luaFile('${domain}/${name}', \`${escaped(lua)}\`);\n`;
    });
  return [
    '// Generated from the .lua files in this folder by `npm run lua`: edit those, then run it.',
    `import { luaFile } from '${runtime.startsWith('.') ? runtime : `./${runtime}`}';`,
    '',
    ...scripts,
  ].join('\n');
}

describe('the modules generated from the .lua files', () => {
  it.each(luaFolders())('%s/index.ts is up to date (else run `npm run lua`)', async (folder) => {
    const file = path.join(root, folder, 'index.ts');
    const options = { ...(await resolveConfig(file)), filepath: file };
    await expect(await format(render(folder), options)).toMatchFileSnapshot(file);
  });
});
