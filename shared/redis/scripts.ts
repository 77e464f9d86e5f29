/**
 * Lua scripts as files, in BullMQ's manner. Every script the functions run is a .lua file in its
 * domain's `lua/` folder (shared/<domain>/lua/), and starts with a header:
 *
 *   --[[
 *     What the script does.
 *
 *     Input:
 *       KEYS[1] tasks:{<node>}:stream      what the key holds
 *       KEYS[2] tasks:{<node>}:versions    ...
 *       ARGV[1] service                    what the argument is
 *     Output:
 *       what it returns
 *   ]]
 *
 * A KEYS line names the key as the caller builds it: literal text, `<name>` for a variable part,
 * and in braces the hash tag all the script's keys share, so that on Redis Cluster they live in
 * one slot (a cluster refuses a script whose keys span two). The script takes as many keys as
 * its header declares. A line `--- @include "includes/<file>"` stands for that file's text.
 *
 * Each folder's index.ts is generated from its .lua files (`npm run lua`), one `luaFile` each:
 * plain TypeScript, so vitest, tsc's dist/ and the esbuild bundle all load the scripts the same
 * way, with nothing read from disk at run time. test/shared/redis/lua-modules.test.ts fails when
 * an index.ts is stale, and test/shared/redis/script-slots.test.ts checks each header against
 * the keys its callers send.
 */
import { luaScript } from './client.js';
import type { LuaScript } from './client.js';

/** A script from a .lua file, with the keys its header declares. */
interface LuaFile extends LuaScript {
  /** The keys' templates, KEYS[1] first (`tasks:{<node>}:stream`). */
  readonly keys: readonly string[];
}

const headerBlock = /^--\[\[([\s\S]*?)\]\]/;
const keyLine = /^[ \t]*KEYS\[(\d+)\][ \t]+(\S+)/gm;

/** The key templates the header of `lua` declares, KEYS[1] first. */
function declaredKeys(name: string, lua: string): string[] {
  const header = headerBlock.exec(lua)?.[1];
  if (header === undefined) throw new Error(`${name}.lua does not start with a --[[ header ]]`);
  return [...header.matchAll(keyLine)].map(([, index, template], i) => {
    if (Number(index) !== i + 1) {
      throw new Error(`${name}.lua declares KEYS[${index}] where KEYS[${i + 1}] is due`);
    }
    return template!;
  });
}

/**
 * The script of a .lua file (`name`: its folder's domain and its name, `sync/offer`), with as
 * many keys as its header declares. Generated modules call it once per file, at load.
 */
function luaFile(name: string, lua: string): LuaFile {
  const keys = Object.freeze(declaredKeys(name, lua));
  return Object.freeze({ ...luaScript(keys.length, lua, name), keys });
}

export { luaFile };
export type { LuaFile };
