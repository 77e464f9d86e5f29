// Generated from the .lua files in this folder by `npm run lua`: edit those, then run it.
import { luaFile } from '../../../shared/redis/scripts.js';

/** count.lua */
export const count = luaFile(
  'bench/harness/count',
  `--[[
  The benchmark's effect (bench/harness/index.ts): run bare with EVALSHA, and through
  defineIdempotentScript.

  Input:
    KEYS[1] count:{<tag>}   a counter
    ARGV[1] by
  Output:
    the counter's new value
]]
return redis.call('INCRBY', KEYS[1], ARGV[1])
`,
);
