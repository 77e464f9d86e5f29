/**
 * Which kubectl the tests drive: none (those tests skip, saying so), or its minor version, since
 * kubectl before 1.27 validates on the client from OpenAPI v2 where later ones ask the server
 * (OpenAPI v3 and fieldValidation).
 */
import { spawnSync } from 'node:child_process';

function clientMinor(): number | undefined {
  const run = spawnSync('kubectl', ['version', '--client', '-o', 'json'], { encoding: 'utf8' });
  if (run.error !== undefined || run.status !== 0) return undefined;
  const version = JSON.parse(run.stdout) as { clientVersion?: { minor?: string } };
  return Number.parseInt(version.clientVersion?.minor ?? '', 10);
}

const minor = clientMinor();

/** Why the kubectl tests skip, or undefined when kubectl is there. */
export const kubectlMissing = minor === undefined ? 'kubectl is not on PATH' : undefined;

/** kubectl 1.27 and later leave create/apply validation to the server (fieldValidation). */
export const validatesOnServer = minor !== undefined && minor >= 27;
