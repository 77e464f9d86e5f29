/**
 * Hot reload of the edge worker's mining settings: downstream-sync keeps each node's current
 * task per service in Redis (`tasks:{<node>}:current`); the worker polls its own entry and, when
 * the generation (or the object) changes, swaps in the new miner (and budget target) without a restart. A task it
 * cannot use is logged and the running settings stay.
 */
import type { RedisClient } from '../redis/index.js';
// The file, not the index: the index pulls in the controller (and client-node) at start-up.
import { nodeKeys } from '../sync/streams.js';
import type { Logger } from '../telemetry/index.js';
import type { HardExampleMiner } from './hem.js';
import { minerFromConfig } from './miner-config.js';

interface ReloadTarget {
  miner: HardExampleMiner;
}

interface TaskSpec {
  edgeWorker?: {
    hardExampleAlgorithm?: { name?: string; parameters?: Record<string, unknown> };
    workerSpec?: { parameters?: Array<{ key: string; value: string }> };
  };
}

/** The miner (and budget target) a task's spec asks for. */
function minerFromTask(spec: TaskSpec): ReturnType<typeof minerFromConfig> {
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
    const task = JSON.parse(text) as {
      uid?: string;
      generation?: number;
      resource?: { spec?: TaskSpec };
    };
    if (task.generation === undefined) return;
    const version = `${task.uid ?? ''}:${task.generation}`;
    if (version === loaded) return;
    const { miner, targetOffloadRatio } = minerFromTask(task.resource?.spec ?? {});
    options.target.miner = miner;
    options.onBudget?.(targetOffloadRatio);
    loaded = version;
    options.log.info(
      { generation: task.generation, miner: miner.name },
      'mining settings reloaded from the task',
    );
  };
  const timer = setInterval(() => {
    poll().catch((err: unknown) =>
      options.log.warn(
        { err: err instanceof Error ? err.message : String(err) },
        'task reload failed; keeping the running settings',
      ),
    );
  }, options.pollMs);
  timer.unref();
  return { poll, stop: () => clearInterval(timer) };
}

export { watchTask, minerFromTask };
