/**
 * Every Lua script touches one Redis Cluster slot. A cluster refuses a script whose keys hash to
 * two slots (CROSSSLOT) and cannot route a key built inside Lua, while a single Redis runs both,
 * so only this check (or a cluster: `make test-redis-cluster`) catches them. The scripts are the
 * .lua files of the `lua/` folders, whose headers declare their keys (shared/redis/scripts.ts):
 * - each header's keys share one hash tag;
 * - the Lua takes every key it names from KEYS, never builds one;
 * - run once by the code that uses it, each script is sent the keys its header declares, in its
 *   order, with one tag;
 * - nothing else in shared/ or functions/ runs a script.
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { createBindingStore } from '../../../shared/aset/binding-store.js';
import { createRoundStore } from '../../../shared/fl/round-store.js';
import { createQualityWindow } from '../../../shared/inference/quality-window.js';
import { createBudget, sharedAnswers } from '../../../shared/inference/index.js';
import {
  createJoinStore,
  createPathStore,
  createRouteStore,
} from '../../../shared/mlgraph/index.js';
import { defineIdempotentScript, hashTag, key } from '../../../shared/redis/index.js';
import type { LuaFile, RedisClient } from '../../../shared/redis/index.js';
import { idempotentScript } from '../../../shared/redis/idempotency.js';
import { createReportCounters } from '../../../shared/status/index.js';
import { createTaskConsumer, createTaskStreams } from '../../../shared/sync/index.js';
import { count } from '../../../bench/harness/lua/index.js';
import { capturedTelemetry } from '../../support/http.js';
import { testRedis } from '../../support/redis.js';
import { helmetDetectionTask } from '../../support/samples.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));

/** The .ts files under `dirs`, '/'-separated from the root. */
const sources = (...dirs: string[]) =>
  dirs.flatMap((dir) =>
    readdirSync(path.join(root, dir), { recursive: true, encoding: 'utf8' })
      .map((entry) => path.posix.join(dir, entry.split(path.sep).join('/')))
      .filter((file) => file.endsWith('.ts') && statSync(path.join(root, file)).isFile()),
  );

/** Every script: the exports of each generated `lua/index.ts`. */
async function luaFiles(): Promise<LuaFile[]> {
  const modules = sources('shared', 'bench').filter((file) => file.endsWith('/lua/index.ts'));
  const loaded = await Promise.all(
    modules.map((file) => import(pathToFileURL(path.join(root, file)).href)),
  );
  return loaded.flatMap((module) => Object.values(module as Record<string, LuaFile>));
}

/** The hash tags (`{...}`) in a key template. */
const tagsOf = (template: string) => template.match(/\{[^{}]*\}/g) ?? [];

/** Redis's hash tag of a key: between the first '{' and the next '}', when not empty. */
function slotTag(key: string): string | undefined {
  const open = key.indexOf('{');
  const close = key.indexOf('}', open + 1);
  return open >= 0 && close > open + 1 ? key.slice(open + 1, close) : undefined;
}

/** A key template as a pattern: literal text, `<name>` any text (no braces inside the tag). */
function keyPattern(template: string): RegExp {
  const escape = (text: string) => text.replace(/[.*+?^$()|[\]\\]/g, '\\$&');
  const part = (text: string, any: string) =>
    text
      .split(/<[^>]*>/)
      .map(escape)
      .join(any);
  const [before = '', tag = '', after = ''] = template.split(/[{}]/);
  return new RegExp(`^${part(before, '.+')}\\{${part(tag, '[^{}]+')}\\}${part(after, '.+')}$`);
}

/** `text` split at its top-level commas, up to a closing bracket it did not open. */
function topLevel(text: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let quote = '';
  let start = 0;
  let end = 0;
  for (; end < text.length; end += 1) {
    const c = text[end]!;
    if (quote !== '') {
      if (c === '\\') end += 1;
      else if (c === quote) quote = '';
    } else if (c === "'" || c === '"') quote = c;
    else if ('({['.includes(c)) depth += 1;
    else if (')}]'.includes(c) && (depth -= 1) < 0) break;
    else if (c === ',' && depth === 0) {
      parts.push(text.slice(start, end).trim());
      start = end + 1;
    }
  }
  return [...parts, text.slice(start, end).trim()];
}

/** Which of a command's arguments is its key (1: the first), where not the first. */
const keyArgument: Record<string, number> = { XGROUP: 2 };

/** How `lua` names keys: every key a command names must come from KEYS, and be declared. */
function keyProblems(lua: string, numberOfKeys: number): string[] {
  const code = lua.replace(/--\[\[[\s\S]*?\]\]/g, '').replace(/--.*$/gm, '');
  const fromKeys = new Set<string>();
  for (const [, names, values] of code.matchAll(/^\s*local ([\w, ]+)=(.*)$/gm)) {
    const exprs = topLevel(values!);
    names!.split(',').forEach((name, i) => {
      if (/^(KEYS\[\d+\]|table\.remove\(KEYS, 1\))$/.test(exprs[i] ?? ''))
        fromKeys.add(name.trim());
    });
  }
  const problems = [...fromKeys]
    .filter((name) => new RegExp(`^\\s*${name}\\s*=[^=]`, 'm').test(code))
    .map((name) => `${name}, taken from KEYS, is assigned again`);
  const used = new Set([...code.matchAll(/\bKEYS\[(\d+)\]/g)].map(([, n]) => Number(n)));
  if (/table\.remove\(KEYS, 1\)/.test(code)) used.add(1);
  for (let n = 1; n <= Math.max(numberOfKeys, ...used); n += 1) {
    if (!used.has(n)) problems.push(`KEYS[${n}] is declared but not used`);
    if (n > numberOfKeys) problems.push(`KEYS[${n}] is not declared`);
  }
  for (const call of code.matchAll(/\bredis\.p?call\b(\(?)/g)) {
    if (call[1] === '') {
      problems.push('redis.call is not called directly');
      continue;
    }
    const [command = '', ...args] = topLevel(code.slice(call.index + call[0].length));
    const name = /^'([A-Za-z]+)'$/.exec(command)?.[1]?.toUpperCase();
    if (name === undefined) {
      problems.push(`a command ${command} that is not a literal`);
      continue;
    }
    const arg = args[(keyArgument[name] ?? 1) - 1] ?? '';
    if (!/^KEYS\[\d+\]$/.test(arg) && !fromKeys.has(arg)) {
      problems.push(`${name} key ${arg} is not taken from KEYS`);
    }
  }
  return problems;
}

describe('Lua scripts stay in one Redis Cluster slot', () => {
  let scripts: LuaFile[];
  beforeAll(async () => {
    scripts = await luaFiles();
  });

  it('declare keys that share one hash tag', () => {
    expect(scripts.length).toBeGreaterThan(20);
    const problems = scripts.flatMap((script) => {
      const tags = script.keys.map(tagsOf);
      if (script.keys.length === 0) return [`${script.name}: declares no keys`];
      if (tags.some((t) => t.length !== 1)) return [`${script.name}: a key has not one {tag}`];
      const distinct = new Set(tags.flat());
      return distinct.size === 1
        ? []
        : [`${script.name}: keys with tags ${[...distinct].join(', ')}`];
    });
    expect(problems).toEqual([]);
  });

  it('take every key they name from KEYS', () => {
    const problems = scripts.flatMap((script) =>
      keyProblems(script.lua, script.numberOfKeys).map((p) => `${script.name}: ${p}`),
    );
    expect(problems).toEqual([]);
  });

  it('are sent, by the code that runs them, the keys their headers declare', async () => {
    const redis = await testRedis();
    try {
      const client = redis.client as unknown as { evalsha: (...args: unknown[]) => unknown };
      const sent = vi.spyOn(client, 'evalsha');
      await runEveryScript(redis.client);
      // Each script by its SHA, alone or as the effect of an idempotent one.
      const bySha = new Map(scripts.map((s) => [s.sha, { file: s, keys: s.keys }]));
      const wrapper = scripts.find((s) => s.name === 'redis/idempotent')!;
      for (const effect of scripts) {
        const keys = [...wrapper.keys, ...effect.keys];
        bySha.set(idempotentScript(effect).sha, { file: effect, keys });
      }
      const ran = new Set(['redis/idempotent']);
      const problems = sent.mock.calls.flatMap(([sha, numberOfKeys, argv]) => {
        const script = bySha.get(String(sha));
        if (script === undefined) return [`a script of no .lua file ran (${String(sha)})`];
        ran.add(script.file.name);
        const keys = (argv as string[]).slice(0, Number(numberOfKeys));
        const wrong = script.keys.filter((template, i) => !keyPattern(template).test(keys[i]!));
        const tags = new Set(keys.map(slotTag));
        return wrong.length === 0 && keys.length === script.keys.length && tags.size === 1
          ? []
          : [`${script.file.name}: sent ${keys.join(' ')} for ${script.keys.join(' ')}`];
      });
      expect(problems).toEqual([]);
      expect(scripts.map((s) => s.name).filter((name) => !ran.has(name))).toEqual([]);
    } finally {
      await redis.close();
    }
  });

  it('are run only through runScript, from .lua files', () => {
    // A command by name ('EVALSHA', 'fcall_ro'), not a word that starts like one ('evaluation').
    const sendsScripts =
      /\.(eval|evalsha|eval_ro|evalsha_ro|fcall|defineCommand)\(|'(EVAL(SHA)?|FCALL)(_RO)?'/i;
    const code = sources('shared', 'functions').filter((file) => !file.endsWith('/lua/index.ts'));
    const problems = code.flatMap((file) => {
      const text = readFileSync(path.join(root, file), 'utf8');
      const found: string[] = [];
      if (file !== 'shared/redis/client.ts' && sendsScripts.test(text)) {
        found.push(`${file} sends a script itself`);
      }
      if (!file.startsWith('shared/redis/') && /\bluaScript\(/.test(text)) {
        found.push(`${file} holds a script outside a .lua file`);
      }
      if (file !== 'shared/redis/scripts.ts' && /\bluaFile\(/.test(text)) {
        found.push(`${file} makes a luaFile by hand`);
      }
      return found;
    });
    expect(problems).toEqual([]);
  });
});

describe('the Lua rule: every key a command names comes from KEYS', () => {
  it.each([
    ["local k = KEYS[1]\nreturn redis.call('GET', k)", 1, []],
    ["local seen = table.remove(KEYS, 1)\nreturn redis.call('DEL', seen)", 1, []],
    ["redis.pcall('XGROUP', 'CREATE', KEYS[1], ARGV[1]) return 1", 1, []],
    [
      "local k = KEYS[1] .. ':x'\nreturn redis.call('GET', k)",
      1,
      ['GET key k is not taken from KEYS'],
    ],
    [
      "local k = KEYS[1]\nk = ARGV[1]\nreturn redis.call('GET', k)",
      1,
      ['k, taken from KEYS, is assigned again'],
    ],
    [
      "redis.call('SET', KEYS[1], 1)\nreturn redis.call('SET', 'lock:' .. ARGV[1], 1)",
      1,
      ["SET key 'lock:' .. ARGV[1] is not taken from KEYS"],
    ],
    ['return redis.call(ARGV[1], KEYS[1])', 1, ['a command ARGV[1] that is not a literal']],
    [
      "local call = redis.call\nreturn call('GET', KEYS[1])",
      1,
      ['redis.call is not called directly'],
    ],
    [
      "return redis.call('GET', KEYS[2])",
      1,
      ['KEYS[1] is declared but not used', 'KEYS[2] is not declared'],
    ],
  ] as const)('%j', (lua, numberOfKeys, problems) => {
    expect(keyProblems(lua, numberOfKeys)).toEqual(problems);
  });
});

/** Runs each script once, as the code that uses it does. */
async function runEveryScript(redis: RedisClient): Promise<void> {
  const { log } = capturedTelemetry('script-slots');
  const node = 'edge0';
  const service = 'default/helmet-detection-demo';
  const streams = createTaskStreams(redis, { maxLength: 100 });
  await streams.offer(node, helmetDetectionTask(1, { name: 'Threshold' }));
  const pending = await streams.localControllerPending(node, service);
  await streams.confirmLocalController(node, service, pending);
  await streams.forgetLocalController(node, service);
  await createTaskConsumer(redis, { node, consumer: 'c1' });

  const counters = createReportCounters(redis, { dedupeSeconds: 60, retentionSeconds: 60 });
  await counters.record(
    'default/x/u1',
    { source: 'node/edge0', id: 'r1' },
    { node, id: node },
    {
      worker: 'edge',
      phase: 'Inference',
      status: 'Running',
      output: { taskInfo: { uploaded: 1, inferenceNumber: 2, hardExampleNumber: 1 } },
    },
    new Date(0).toISOString(),
  );

  const budget = createBudget({ redis, service, target: 0.1, window: 10, refreshMs: 0, log });
  budget.observe(0.5);
  await budget.refresh();
  const answers = sharedAnswers(redis, {
    scope: service,
    leaseSeconds: 1,
    keepSeconds: 60,
    warn: () => {},
  });
  // Slower than a third of the lease, so the claim is renewed; then one that fails (released).
  await answers('e1', () => new Promise((resolve) => setTimeout(() => resolve(1), 450)));
  await answers('e2', () => Promise.reject(new Error('no'))).catch(() => undefined);
  const quality = createQualityWindow({
    redis,
    service,
    reporter: 'edge0-1',
    bucketSize: 50,
    buckets: 4,
    driftWindow: 20,
    refreshMs: 0,
    calibration: undefined,
    drift: { expectedShare: 0.05, raiseAt: 5, clearAt: 2, minInputs: 20 },
    log,
  });
  for (let i = 0; i < 30; i += 1) quality.observe(0, true);
  await quality.refresh();

  const joins = createJoinStore(redis, {
    node: 'ns.g-join',
    deadlineMs: 1,
    keepMs: 60_000,
    leaseMs: 500,
  });
  await joins.add({ puid: 'p1', source: 'a', pending: 1, payload: 1, nowMs: 0 });
  await joins.tighten({ puid: 'p2', inputs: 2 });
  const { claimed } = await joins.due(5_000, 10);
  await joins.finish('p1', claimed[0]!.claim);
  await createPathStore(redis, { graph: 'ns/g', ttlMs: 60_000 }).record('p1', ['r1']);
  const routes = createRouteStore(redis, { node: 'ns.g-pick', puidTtlMs: 60_000 });
  await routes.record('p1', ['a'], ['a', 'b']);
  await routes.reward('p1', 1);

  const bindings = createBindingStore(redis, {
    topology: 't',
    workers: 2,
    tombstoneMs: 1000,
    dedupeSeconds: 60,
  });
  await bindings.window(0, 1000);
  await bindings.setPolicy(0, 'closest');
  await bindings.reserve(
    {
      id: 's1',
      worker: 0,
      scheduler: 'x',
      policy: 'closest',
      fingerprint: 'f',
      delta: '0.5',
      rate: '5',
      cell: 3,
      expectedMs: 10,
      boundAtMs: 0,
      expiresAtMs: 100,
    },
    1,
    0,
  );
  await bindings.release('s1', 10);
  await bindings.sweep(200, 10);
  await bindings.addResponses({ source: '/agent', id: 'r1' }, [{ worker: 0, responses: 5 }]);

  const rounds = createRoundStore(redis, 'ns/job/uid-1');
  await rounds.open({ selected: ['w'], quorum: 1, nowMs: 0, deadlineMs: 1, sha: '' });
  await rounds.offer({
    round: 1,
    worker: 'w',
    base: 0,
    meta: '{}',
    weights: Buffer.alloc(4),
    nowMs: 0,
  });
  await rounds.claim(1, 't', 0, 1000);
  await rounds.commit({
    round: 1,
    token: 't',
    outcome: 'next',
    version: 1,
    sha: '',
    summary: JSON.stringify({ round: 1 }),
    selected: ['w'],
    quorum: 1,
    nowMs: 0,
    deadlineMs: 1,
  });
  await rounds.patchHistory(1, (entry) => entry);
  await rounds.claim(2, 't2', 5, 1000);
  await rounds.commit({ round: 2, token: 't2', outcome: 'failed', nowMs: 5, message: 'x' });

  const tag = 'bench-0';
  await defineIdempotentScript(redis, count, { ttlSeconds: 60 })(
    { source: '/bench', id: '1', tag },
    [key('count', hashTag(tag))],
    [1],
  );
}
