/** The miner a worker runs, from its configured name and both parameter forms. */
import { ConfigError, ValidationError } from '../errors/index.js';
import { createMiner, hemNames, parseHemParameters } from './hem.js';
import type { HardExampleMiner, HemName, HemParameters } from './hem.js';

const typedKeys = ['threshold', 'thresholdImg', 'thresholdBox', 'ratio', 'margin', 'seed'] as const;

function isHemName(name: string): name is HemName {
  return (hemNames as readonly string[]).includes(name);
}

/** A ConfigError naming HEM_NAME or the bad parameter, so the worker stops at start-up. */
function minerFromConfig(hem: {
  name: string;
  workerParameters: Readonly<Record<string, string>>;
  typedParameters: Readonly<Record<string, string>>;
}): HardExampleMiner {
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
    return createMiner(hem.name, parameters);
  } catch (err) {
    if (err instanceof ValidationError) throw new ConfigError(`HEM parameters: ${err.message}`);
    throw err;
  }
}

export { minerFromConfig, isHemName };
