/**
 * A reward for a graph's prediction, sent to every router that learns and that the prediction
 * went through, once: a built-in router keeps each prediction's route itself, so it is asked
 * directly; a router of your own on the path was written down (PathStore) and gets the reward
 * by the route contract.
 */
import { NotFoundError, UnavailableError } from '../errors/index.js';
import type { HttpSend } from '../http/index.js';
import type { GraphNode } from './graph-nodes.js';
import { StepFailure, callNode } from './node-call.js';
import type { PathStore } from './path-store.js';
import type { Router } from './router.js';

interface RewardDeps {
  send: HttpSend;
  paths: PathStore;
  now: () => number;
}

interface Outcome {
  name: string;
  outcome: string;
  failed: boolean;
}

/** A built-in router's reward, applied here to the state its Service shares. */
async function rewardHere(router: Router, name: string, puid: string, reward: number) {
  try {
    return { name, outcome: await router.reward(puid, reward), failed: false };
  } catch (error) {
    // The router forgot the prediction (its own TTL): nothing a retry could change.
    if (error instanceof NotFoundError) return { name, outcome: 'unknown', failed: false };
    throw error;
  }
}

async function rewardOne(
  deps: RewardDeps,
  name: string,
  node: GraphNode | undefined,
  puid: string,
  reward: number,
): Promise<Outcome> {
  if (node?.kind !== 'remote-router')
    return { name, outcome: 'not in this graph any more', failed: false };
  try {
    const answer = await callNode(deps.send, node.rewardUrl, {
      method: 'POST',
      body: JSON.stringify({ puid, reward }),
      headers: { 'content-type': 'application/json' },
      retries: 1,
      attemptMs: 2_000,
      deadline: deps.now() + 5_000,
      now: deps.now,
    });
    const body =
      answer.payload.kind === 'json' ? (answer.payload.value as { outcome?: unknown }) : undefined;
    return {
      name,
      outcome: typeof body?.outcome === 'string' ? body.outcome : 'accepted',
      failed: false,
    };
  } catch (error) {
    if (!(error instanceof StepFailure)) throw error;
    // The router forgot the prediction (its own TTL): nothing a retry could change.
    if (error.status === 404) return { name, outcome: 'unknown', failed: false };
    return { name, outcome: `${error.status} ${error.message}`, failed: error.status >= 500 };
  }
}

/** Sends the reward to every router on the prediction's path; says what each did. */
async function rewardRouters(
  deps: RewardDeps,
  nodes: ReadonlyMap<string, GraphNode>,
  puid: string,
  reward: number,
): Promise<{ puid: string; routers: Record<string, string> }> {
  const learning = [...nodes.values()].flatMap((n) => (n.kind === 'router' && n.learns ? [n] : []));
  // A built-in learning router that knows the prediction was on its path (it keeps each
  // prediction's route); the routers of your own on it were written down.
  const [here, remote] = await Promise.all([
    Promise.all(learning.map((n) => rewardHere(n.router, n.name, puid, reward))),
    deps.paths.routers(puid),
  ]);
  const outcomes = [
    ...here.filter((o) => o.outcome !== 'unknown'),
    ...(await Promise.all(
      remote.map((name) => rewardOne(deps, name, nodes.get(name), puid, reward)),
    )),
  ];
  if (outcomes.length === 0)
    throw new NotFoundError(
      `prediction ${puid} is unknown here: no router that learns was on its path, or it expired`,
    );
  const failed = outcomes.filter((o) => o.failed);
  if (failed.length > 0) {
    // Retrying is safe: the routers that took it answer "duplicate".
    throw new UnavailableError(
      `reward not taken by ${failed.map((o) => `${o.name} (${o.outcome})`).join(', ')}`,
    );
  }
  return { puid, routers: Object.fromEntries(outcomes.map((o) => [o.name, o.outcome])) };
}

export { rewardRouters };
