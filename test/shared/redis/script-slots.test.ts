/**
 * Static, no Redis: every Lua script touches one Redis Cluster slot. A cluster refuses a script
 * whose keys hash to two slots (CROSSSLOT) and cannot route a key built inside Lua, while a
 * single Redis runs both, so only this check (or a cluster) catches them. The analyser is in
 * test/support/script-slots.ts; the fixtures below show it reports what it must.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { analyse, loadProject, luaKeyProblems, parseSources } from '../../support/script-slots.js';
import type { Analysis } from '../../support/script-slots.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const project = loadProject(root, ['shared', 'functions']);
const real = analyse(project);

/** Every problem the analysis found, definitions and call sites together. */
const problemsOf = (analysis: Analysis): string[] => [
  ...analysis.definitions.flatMap((d) => d.problems),
  ...analysis.sites.flatMap((s) => s.problems),
  ...analysis.directEvals,
];

const siteTitle = (site: Analysis['sites'][number]) =>
  `${site.label} (${site.keys.length} key${site.keys.length === 1 ? '' : 's'}, tag ${site.tags.join(' | ') || 'none'})`;

describe('Lua scripts stay in one Redis Cluster slot', () => {
  it.each(real.definitions.map((d) => [d.label, d] as const))(
    '%s takes every key it names from KEYS',
    (_label, definition) => {
      expect(definition.problems).toEqual([]);
    },
  );

  it.each(real.sites.map((s) => [siteTitle(s), s] as const))(
    '%s: the keys share one hash tag',
    (_title, site) => {
      expect(site.problems).toEqual([]);
    },
  );

  it('checks a call site in every file that runs a script', () => {
    // A file that calls runScript or a defineIdempotentScript function, where the analyser
    // found no site, would mean sites are slipping past it.
    const running = [...project.values()]
      .filter((file) => /\brunScript\(|\bdefineIdempotentScript\(/.test(file.text))
      .map((file) => file.fileName)
      .filter((name) => name !== 'shared/redis/client.ts');
    const checked = new Set(real.sites.flatMap((s) => s.files));
    expect(running.filter((name) => !checked.has(name))).toEqual([]);
    expect(real.sites.length).toBeGreaterThanOrEqual(running.length);
  });

  it('runs every script through runScript, imported by name (nothing else sends EVAL)', () => {
    expect(real.directEvals).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------
// The analyser on fixtures: what it must report, and a case it must pass

const idempotency = readFileSync(`${root}shared/redis/idempotency.ts`, 'utf8');

describe('the slot analyser', () => {
  it('reports a call whose keys carry two different hash tags', () => {
    const analysis = analyse(
      parseSources({
        'shared/demo/move.ts': `import { hashTag, key, luaScript, runScript } from '../redis/index.js';
import type { RedisClient } from '../redis/index.js';

const move = luaScript(2, "return redis.call('SMOVE', KEYS[1], KEYS[2], ARGV[1])");

export function moveItem(redis: RedisClient, from: string, to: string, item: string) {
  return runScript(redis, move, [key('set', hashTag(from)), key('set', hashTag(to)), item], Number);
}
`,
      }),
    );
    expect(problemsOf(analysis)).toEqual([
      "shared/demo/move.ts:7: script move keys key('set', hashTag(from)), key('set', hashTag(to)) use tags from, to",
    ]);
  });

  it('reports a Lua script that builds a key from ARGV', () => {
    const analysis = analyse(
      parseSources({
        'shared/demo/lock.ts': `import { hashTag, key, luaScript, runScript } from '../redis/index.js';
import type { RedisClient } from '../redis/index.js';

const lock = luaScript(1, "return redis.call('SET', 'lock:' .. ARGV[1], ARGV[2], 'NX')");

export function takeLock(redis: RedisClient, name: string, owner: string) {
  return runScript(redis, lock, [key('lock', hashTag(name)), name, owner], String);
}
`,
      }),
    );
    expect(problemsOf(analysis)).toEqual([
      "shared/demo/lock.ts:4: script lock SET key 'lock:' .. ARGV[1] is not taken from KEYS",
      "shared/demo/lock.ts:7: script lock SET key 'lock:' .. ARGV[1] is not taken from KEYS",
    ]);
  });

  it('reports a key without a hash tag in a script of two keys', () => {
    const analysis = analyse(
      parseSources({
        'shared/demo/backup.ts': `import { hashTag, key, luaScript, runScript } from '../redis/index.js';
import type { RedisClient } from '../redis/index.js';

const copy = luaScript(2, "return redis.call('COPY', KEYS[1], KEYS[2])");

export function backup(redis: RedisClient, name: string) {
  const from = key('doc', hashTag(name));
  return runScript(redis, copy, [from, 'backup:latest'], Number);
}
`,
      }),
    );
    expect(problemsOf(analysis)).toEqual([
      "shared/demo/backup.ts:8: script copy key 'backup:latest' has no hash tag",
    ]);
  });

  it("reports a defineIdempotentScript call whose delivery tag is not its keys' tag", () => {
    const analysis = analyse(parseSources(idempotentFixture('other')));
    expect(problemsOf(analysis)).toEqual([
      "shared/demo/counter.ts:8: script defineIdempotentScript 'count' keys deliveryKey(delivery), key('count', hashTag(service)) use tags other, service",
    ]);
  });

  it('reports a script run through a wrapper it cannot follow, instead of skipping it', () => {
    const analysis = analyse(
      parseSources({
        'shared/demo/wrapper.ts': `import { luaScript, runScript } from '../redis/index.js';
import type { RedisClient } from '../redis/index.js';

const copy = luaScript(2, "return redis.call('COPY', KEYS[1], KEYS[2])");

export function copyKeys(redis: RedisClient, keys: readonly string[]) {
  return runScript(redis, copy, [...keys], Number);
}
`,
      }),
    );
    expect(problemsOf(analysis)).toEqual([
      'shared/demo/wrapper.ts:7: script copy cannot resolve its 2 keys from [...keys]',
      'shared/demo/wrapper.ts:6: copyKeys is exported; its callers elsewhere are not followed',
    ]);
  });

  it('reports a script sent with EVAL around runScript', () => {
    const analysis = analyse(
      parseSources({
        'shared/demo/eval.ts': `import type { RedisClient } from '../redis/index.js';

export function raw(redis: RedisClient, k: string) {
  return redis.eval("return redis.call('GET', KEYS[1])", 1, k);
}
`,
      }),
    );
    expect(analysis.directEvals).toEqual([
      'shared/demo/eval.ts:4: .eval(...) runs a script without runScript',
    ]);
  });

  it('passes keys that share a tag through consts, builders, wrappers and modules', () => {
    const analysis = analyse(parseSources({ ...positiveFixture, ...idempotentFixture('service') }));
    expect(problemsOf(analysis)).toEqual([]);
    expect(analysis.sites.map((s) => [s.label, s.tags])).toEqual([
      ['shared/demo/store.ts:27 push (via shared/demo/store.ts:25)', ['node']],
      ['shared/demo/store.ts:28 trim', ['`user:${node}`']],
      [
        "shared/demo/counter.ts:8 defineIdempotentScript 'count' (via shared/redis/idempotency.ts:69)",
        ['service'],
      ],
    ]);
  });
});

describe('the Lua rule: every key a command names comes from KEYS', () => {
  it.each([
    ["local k = KEYS[1]\nreturn redis.call('GET', k)", []],
    ["local k = table.remove(KEYS, 1)\nreturn redis.call('GET', k)", []],
    ["-- redis.call('GET', 'x')\nreturn redis.call('GET', KEYS[1], '--[[x]]')", []],
    [
      "local k = KEYS[1] .. ':x'\nreturn redis.call('GET', k)",
      ['GET key k is not taken from KEYS'],
    ],
    [
      "local k = KEYS[1]\nk = ARGV[1]\nreturn redis.call('GET', k)",
      ['GET key k is not taken from KEYS'],
    ],
    [
      "local a, b = KEYS[1], ARGV[1]\nredis.call('SET', a, 1)\nreturn redis.call('SET', b, 1)",
      ['SET key b is not taken from KEYS'],
    ],
    [
      "return redis.call('DEL', KEYS[1], 'x:' .. ARGV[1])",
      ["DEL key 'x:' .. ARGV[1] is not taken from KEYS"],
    ],
    ['return redis.call(ARGV[1], KEYS[1])', ["redis.call's command ARGV[1] is not a literal"]],
    [
      "return redis.call('SUNIONSTORE', KEYS[1], KEYS[2])",
      ["SUNIONSTORE: not in the table of commands' key arguments"],
    ],
    ["local call = redis.call\nreturn call('GET', 'x')", ['redis.call is not called directly']],
    ["return redis.call('TIME')", []],
  ])('%j', (lua, problems) => {
    expect(luaKeyProblems(lua)).toEqual(problems);
  });
});

/** defineIdempotentScript (the real one) with keys tagged by `service`, delivery by `tag`. */
function idempotentFixture(tag: string): Record<string, string> {
  return {
    'shared/redis/idempotency.ts': idempotency,
    'shared/demo/counter.ts': `import { hashTag, key } from '../redis/keys.js';
import { defineIdempotentScript } from '../redis/idempotency.js';
import type { RedisClient } from '../redis/client.js';

export function counter(redis: RedisClient, service: string, other: string) {
  const lua = "return redis.call('INCRBY', KEYS[1], ARGV[1])";
  const add = defineIdempotentScript(redis, 'count', { keys: 1, lua, ttlSeconds: 60 });
  return (id: string) => add({ source: 'demo', id, tag: ${tag} }, [key('count', hashTag(service))], [1]);
}
`,
  };
}

const positiveFixture = {
  'shared/demo/keys.ts': `import { hashTag, key } from '../redis/index.js';

function nodeKeys(node: string) {
  const tag = hashTag(node);
  return { queue: key('demo', tag, 'queue'), seen: key('demo', tag, 'seen') };
}

export { nodeKeys };
`,
  'shared/demo/store.ts': `import { hashTag, key, luaScript, runScript } from '../redis/index.js';
import type { LuaScript, RedisClient } from '../redis/index.js';
import { nodeKeys } from './keys.js';

const LIMIT = 100;
const push = luaScript(
  2,
  [
    'local queue, seen = KEYS[1], KEYS[2]',
    "if redis.call('SADD', seen, ARGV[1]) == 0 then return 0 end",
    "return redis.call('RPUSH', queue, ARGV[1])",
  ].join('\\n'),
);
const trim = luaScript(2, \`
local first = table.remove(KEYS, 1)
redis.call('LTRIM', first, 0, \${LIMIT - 1}) -- redis.call('GET', 'not code')
return {redis.call('DEL', KEYS[1]), redis.call('TIME')}
\`);

export function createStore(redis: RedisClient, node: string) {
  const { queue, seen } = nodeKeys(node);
  const t = hashTag(\`user:\${node}\`);
  const userKeys = (id: string) => [key('user', t, id), \`user:\${t}:\${id}:log\`];
  const run = (script: LuaScript, keys: readonly string[], args: readonly string[]) =>
    runScript(redis, script, [...keys, ...args], Number);
  return {
    push: (item: string) => run(push, [queue, seen], [item]),
    trim: (id: string) => runScript(redis, trim, [...userKeys(id), '10'], Number),
  };
}
`,
};
