/**
 * Hot reload of the edge worker's mining settings: downstream-sync keeps each node's current
 * task per service in Redis (`tasks:{<node>}:current`); the worker polls its own entry and, when
 * the generation (or the object) changes, swaps in the new miner (and budget target) without a restart. A task it
 * cannot use is logged and the running settings stay. The record and its key are downstream-sync's
 * contract with the edge (shared/messages/edge-task.ts).
 */
import type { z } from 'zod';
import { ConfigError } from '../errors/index.js';
import { edgeMiningSpec, edgeTask, nodeKeys } from '../messages/edge-task.js';
import type { EdgeMiningSpec } from '../messages/edge-task.js';
import type { RedisClient } from '../redis/client.js';
import { repeat } from './repeat.js';
import type { Logger } from '../telemetry/index.js';
import type { HardExampleMiner } from './hem.js';
import { minerFromConfig } from './miner-config.js';

interface ReloadTarget {
  miner: HardExampleMiner;
}

/** `schema`'s reading of `value`, or a ConfigError naming what is wrong with the task. */
function parseTask<S extends z.ZodType>(
  schema: S,
  value: unknown,
  where: string,
  prefix = '',
): z.output<S> {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const reasons = parsed.error.issues.map(
    (issue) => `${[prefix, ...issue.path.map(String)].filter(Boolean).join('.')}: ${issue.message}`,
  );
  throw new ConfigError(`${where}: ${reasons.join('; ')}`);
}

/** The miner (and budget target) a task's spec asks for. */
function minerFromTask(spec: EdgeMiningSpec): ReturnType<typeof minerFromConfig> {
  const hem = spec.edgeWorker?.hardExampleAlgorithm;
  return minerFromConfig({
    name: hem?.name ?? 'Threshold',
    workerParameters: Object.fromEntries(
      (spec.edgeWorker?.workerSpec?.parameters ?? []).map((p) => [p.key, p.value]),
    ),
    typedParameters: Object.fromEntries(
      Object.entries(hem?.parameters ?? {}).map(([k, v]) => [k, String(v)]),
    ),
  });
}

function watchTask(options: {
  redis: RedisClient;
  node: string;
  service: string;
  target: ReloadTarget;
  onBudget?: (targetOffloadRatio: number | undefined) => void;
  pollMs: number;
  log: Logger;
}) {
  const key = nodeKeys(options.node).current;
  // uid and generation: a service deleted and created again under its name starts at 1 again.
  let loaded: string | undefined;
  const poll = async () => {
    const text = await options.redis.hget(key, options.service);
    if (text === null) return;
    const where = `task of ${options.service}`;
    const task = parseTask(edgeTask, JSON.parse(text), where);
    const version = `${task.uid}:${task.generation}`;
    if (version === loaded) return;
    const spec = parseTask(edgeMiningSpec, task.resource['spec'] ?? {}, where, 'spec');
    const { miner, targetOffloadRatio } = minerFromTask(spec);
    options.target.miner = miner;
    options.onBudget?.(targetOffloadRatio);
    loaded = version;
    options.log.info(
      { generation: task.generation, miner: miner.name },
      'mining settings reloaded from the task',
    );
  };
  const stop = repeat(
    options.pollMs,
    poll,
    options.log,
    'task reload failed; keeping the running settings',
  );
  return { poll, stop };
}

export { watchTask };
