/** The miner a worker runs, from its configured name and both parameter forms. */
import { hemNames } from '../crds/schemas.js';
import type { HemName } from '../crds/index.js';
import { ConfigError, ValidationError } from '../errors/index.js';
import { createMiner, parseHemParameters } from './hem.js';
import type { HardExampleMiner, HemParameters } from './hem.js';

const typedKeys = ['threshold', 'thresholdImg', 'thresholdBox', 'ratio', 'margin', 'seed'] as const;

function isHemName(name: string): name is HemName {
  return (hemNames as readonly string[]).includes(name);
}

/**
 * The miner from a worker's settings, and the budget target (targetOffloadRatio) when one is set:
 * the one place both are read, at start-up and on a task reload. A ConfigError names HEM_NAME or
 * the bad parameter, so a worker stops at start-up and a reload keeps its running settings.
 */
function minerFromConfig(hem: {
  name: string;
  workerParameters: Readonly<Record<string, string>>;
  typedParameters: Readonly<Record<string, string>>;
}): { miner: HardExampleMiner; targetOffloadRatio: number | undefined } {
  if (!isHemName(hem.name)) {
    throw new ConfigError(`HEM_NAME: ${hem.name} is not one of ${hemNames.join(', ')}`);
  }
  try {
    const parameters: HemParameters = parseHemParameters(hem.name, hem.workerParameters);
    for (const key of typedKeys) {
      const raw = hem.typedParameters[key];
      if (raw === undefined) continue;
      const value = Number(raw);
      if (!Number.isFinite(value)) throw new ValidationError(`${key}: not a number: ${raw}`);
      parameters[key] = value;
    }
    const target = hem.typedParameters['targetOffloadRatio'];
    const targetOffloadRatio = target === undefined ? undefined : Number(target);
    if (targetOffloadRatio !== undefined && !(targetOffloadRatio >= 0 && targetOffloadRatio <= 1)) {
      throw new ValidationError(`targetOffloadRatio: expected a number in [0, 1], got ${target}`);
    }
    return { miner: createMiner(hem.name, parameters), targetOffloadRatio };
  } catch (err) {
    if (err instanceof ValidationError) throw new ConfigError(`HEM parameters: ${err.message}`);
    throw err;
  }
}

export { minerFromConfig };
