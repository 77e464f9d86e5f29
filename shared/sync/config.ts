/** downstream-sync's settings, read once at start-up (docs/configuration.md "Per function"). */
import { z } from 'zod';
import { readEnv } from '../config/index.js';
import type { Env } from '../config/index.js';

const schema = z.object({
  TASK_STREAM_MAXLEN: z.coerce.number().int().min(10).default(1000),
  LOCAL_CONTROLLER_TIMEOUT_MS: z.coerce.number().int().min(1).default(5000),
});

function loadSyncConfig(env: Env = process.env) {
  const raw = readEnv(schema, env);
  return {
    streamMaxLength: raw.TASK_STREAM_MAXLEN,
    localControllerTimeoutMs: raw.LOCAL_CONTROLLER_TIMEOUT_MS,
  };
}

export { loadSyncConfig };
