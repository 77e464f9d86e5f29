/**
 * Before any timing: the graphs answer what they should, not merely fast. The ensemble's answer
 * holds both members' outputs, each the one the member gives when called directly; the router
 * graph's answer is one model's output (the large member's, since both children are it), and
 * across a few requests its Thompson router sends some to each child.
 */
import type { Request } from './load.js';

interface OipAnswer {
  model_name: string;
  outputs: unknown[];
}

interface Targets {
  small: string;
  large: string;
  ensemble: string;
  ensembleRemote: string;
  routerGraph: string;
}

interface Checked {
  /** Requests of the router graph's check by the child that answered them. */
  routed: Record<string, number>;
  ensembleNodes: string;
}

async function post(
  url: string,
  request: Request,
): Promise<{ body: unknown; text: string; nodes: string | null }> {
  const answer = await fetch(url, request);
  const text = await answer.text();
  if (answer.status !== 200) throw new Error(`${url} answered ${answer.status}: ${text}`);
  return { body: JSON.parse(text) as unknown, text, nodes: answer.headers.get('mlgraph-nodes') };
}

const same = (a: OipAnswer, b: OipAnswer | undefined) =>
  JSON.stringify(a.outputs) === JSON.stringify(b?.outputs);

async function checkEnsemble(
  url: string,
  request: Request,
  direct: OipAnswer[],
): Promise<{ nodes: string; text: string }> {
  const [small, large] = direct as [OipAnswer, OipAnswer];
  const { body, nodes, text } = await post(url, request);
  const joined = body as { partial?: boolean; inputs?: Record<string, OipAnswer> };
  if (joined.partial !== false || !same(small, joined.inputs?.['small'])) {
    throw new Error(`ensemble: no complete join with small's output: ${JSON.stringify(body)}`);
  }
  if (!same(large, joined.inputs?.['large'])) {
    throw new Error(`ensemble: the join lacks large's output: ${JSON.stringify(body)}`);
  }
  const ran = (nodes ?? '').split(',').sort().join(',');
  if (ran !== 'both,large,pick,small') throw new Error(`ensemble: mlgraph-nodes is ${nodes}`);
  return { nodes: nodes!, text };
}

async function checkRouter(targets: Targets, request: Request, large: OipAnswer, times: number) {
  const routed: Record<string, number> = { a: 0, b: 0 };
  for (let i = 0; i < times; i += 1) {
    const { body, nodes } = await post(targets.routerGraph, request);
    if (!same(large, body as OipAnswer)) {
      throw new Error(`router graph: not the large member's answer: ${JSON.stringify(body)}`);
    }
    const children = (nodes ?? '').split(',').filter((n) => n !== 'pick');
    if (children.length !== 1 || routed[children[0]!] === undefined) {
      throw new Error(`router graph: mlgraph-nodes is ${nodes}, not the router and one child`);
    }
    routed[children[0]!]! += 1;
  }
  if (routed['a'] === 0 || routed['b'] === 0) {
    throw new Error(`router graph: ${times} requests all went one way (${JSON.stringify(routed)})`);
  }
  return routed;
}

async function checkAnswers(targets: Targets, request: Request): Promise<Checked> {
  const direct = await Promise.all(
    [targets.small, targets.large].map(async (url) => (await post(url, request)).body as OipAnswer),
  );
  if (direct.some((d) => !Array.isArray(d.outputs) || d.outputs.length === 0)) {
    throw new Error(`a member answered without outputs: ${JSON.stringify(direct)}`);
  }
  // One prediction id for both: the join in the executor and the joiner function answer the
  // same bytes for the same members' answers.
  const same = { ...request, headers: { ...request.headers, 'mlgraph-puid': 'bench-check' } };
  const inExecutor = await checkEnsemble(targets.ensemble, same, direct);
  const remote = await checkEnsemble(targets.ensembleRemote, same, direct);
  if (inExecutor.text !== remote.text) {
    throw new Error(
      `the two joins differ:\n  executor: ${inExecutor.text}\n  joiner:   ${remote.text}`,
    );
  }
  const ensembleNodes = inExecutor.nodes;
  // Thompson sampling with no rewards draws both children alike: 24 all one way is 2^-23.
  const routed = await checkRouter(targets, request, direct[1]!, 24);
  return { routed, ensembleNodes };
}

export { checkAnswers };
export type { Targets };
