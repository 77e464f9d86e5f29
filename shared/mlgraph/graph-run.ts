/**
 * One request's walk through an ML graph, as a pure state machine: the executor tells it what
 * happened (a node answered, a router chose, a step failed softly, a join fired) and it says what
 * to do next. It owns the arithmetic seed 003 asks the data plane for: every input sent to a
 * join carries `mlgraph-pending-requests`, the number of the join's other inputs that may still
 * be part of the transaction, from the routes taken and not taken so far.
 *
 * Every node but a join has one parent, so each node runs at most once and a join gets at most
 * one input per parent. An edge is open until its parent has answered, then taken (the answer
 * goes down it) or dropped (a router did not choose it, or its parent will never run). A node
 * whose every incoming edge is dropped will never run: it is dead, and so are the edges out of
 * it, at once — so an open edge always comes from a node that may still run, and a join's
 * bound (taken + open incoming edges) is the largest number of inputs any choice of the routers
 * still undecided could bring it: exact once they have all decided.
 */
import type { GraphPlan, PlannedEdge, PlannedNode } from '../messages/graph-plan.js';

type EdgeState = 'open' | 'taken' | 'dropped';
type NodeState = 'waiting' | 'running' | 'done' | 'dead' | 'skipped';

/** What the executor must do next. */
type Step<P> =
  /** Call a node (not a join) with this input; `edge` is how it was reached (none: the root). */
  | {
      kind: 'call';
      node: string;
      from: string | undefined;
      edge: PlannedEdge | undefined;
      input: P;
    }
  /** Send one input to a join; the transaction has at most `1 + pending` inputs. */
  | { kind: 'join-input'; node: string; from: string; edge: PlannedEdge; input: P; pending: number }
  /** A route not taken lowered a join's bound after its inputs went: at most `inputs` in all. */
  | { kind: 'join-bound'; node: string; inputs: number };

const edgeKey = (from: string, to: string) => `${from}\u0000${to}`;

/** What every run of a plan shares: its nodes by name and each node's parents. */
interface GraphShape {
  readonly plan: GraphPlan;
  readonly nodes: ReadonlyMap<string, PlannedNode>;
  readonly parents: ReadonlyMap<string, readonly string[]>;
}

/** Made once per plan, not per request. */
function graphShape(plan: GraphPlan): GraphShape {
  const parents = new Map<string, string[]>(plan.nodes.map((n) => [n.name, []]));
  for (const node of plan.nodes)
    for (const edge of node.children) parents.get(edge.node)?.push(node.name);
  return { plan, nodes: new Map(plan.nodes.map((n) => [n.name, n])), parents };
}

class GraphRun<P> {
  private readonly plan: GraphPlan;
  private readonly nodes: ReadonlyMap<string, PlannedNode>;
  private readonly parents: ReadonlyMap<string, readonly string[]>;
  private readonly edges = new Map<string, EdgeState>();
  private readonly states = new Map<string, NodeState>();
  /** The tightest bound each join has been told (1 + pending, or a join-bound). */
  private readonly told = new Map<string, number>();
  private readonly outputs = new Map<string, P>();

  constructor(
    shape: GraphShape,
    private readonly request: P,
  ) {
    ({ plan: this.plan, nodes: this.nodes, parents: this.parents } = shape);
    for (const node of this.plan.nodes) {
      this.states.set(node.name, 'waiting');
      for (const edge of node.children) this.edges.set(edgeKey(node.name, edge.node), 'open');
    }
  }

  /** The first step: call the root with the request. */
  start(): Step<P>[] {
    this.states.set(this.plan.root, 'running');
    return [
      { kind: 'call', node: this.plan.root, from: undefined, edge: undefined, input: this.request },
    ];
  }

  /**
   * `node` answered `output`; a router's `route` names the children it chose (every child when
   * absent). A join that fired is completed the same way.
   */
  completed(node: string, output: P, route?: readonly string[]): Step<P>[] {
    if (this.states.get(node) === 'done') return [];
    this.states.set(node, 'done');
    this.outputs.set(node, output);
    const taken: PlannedEdge[] = [];
    for (const edge of this.node(node).children) {
      const chosen = route === undefined || route.includes(edge.node);
      this.edges.set(edgeKey(node, edge.node), chosen ? 'taken' : 'dropped');
      if (chosen) taken.push(edge);
    }
    // Drops first, so the inputs sent below carry bounds that already know of them.
    for (const edge of this.node(node).children) this.settle(edge.node);
    const steps = taken.flatMap((edge) => this.deliver(node, edge, output));
    return [...steps, ...this.boundSteps(new Set(steps.map((s) => s.node)))];
  }

  /**
   * The call down `from -> to` failed and the edge is Soft: a node is skipped (nothing goes on
   * from it); for a join, that input never came.
   */
  failedSoftly(from: string | undefined, to: string): Step<P>[] {
    if (this.node(to).kind === 'join' && from !== undefined) {
      this.edges.set(edgeKey(from, to), 'dropped');
      this.settle(to);
    } else {
      this.states.set(to, 'skipped');
      for (const edge of this.node(to).children) {
        this.edges.set(edgeKey(to, edge.node), 'dropped');
        this.settle(edge.node);
      }
    }
    return this.boundSteps(new Set());
  }

  /** Inputs a join may still count in all: its taken and open incoming edges. */
  bound(join: string): number {
    return this.incoming(join).filter((s) => s !== 'dropped').length;
  }

  state(node: string): NodeState {
    return this.states.get(node)!;
  }

  /**
   * Whether the answer is settled: every node with no children has answered or will never run.
   * Calls still in flight then cannot change it (e.g. a late input to an outer join).
   */
  finished(): boolean {
    return this.plan.nodes.every(
      (n) =>
        n.children.length > 0 || ['done', 'dead', 'skipped'].includes(this.states.get(n.name)!),
    );
  }

  /** Nodes a soft failure skipped. */
  skipped(): string[] {
    return this.plan.nodes.filter((n) => this.states.get(n.name) === 'skipped').map((n) => n.name);
  }

  /** The answers of the nodes with no children that ran, by node, in declaration order. */
  results(): Map<string, P> {
    const results = new Map<string, P>();
    for (const node of this.plan.nodes) {
      const output = this.outputs.get(node.name);
      if (node.children.length === 0 && output !== undefined) results.set(node.name, output);
    }
    return results;
  }

  private node(name: string): PlannedNode {
    return this.nodes.get(name)!;
  }

  private incoming(name: string): EdgeState[] {
    return (this.parents.get(name) ?? []).map((p) => this.edges.get(edgeKey(p, name))!);
  }

  /**
   * A node none of whose edges can bring it anything is dead, and so is what follows: a waiting
   * node, or a join whose only inputs were lost to soft failures.
   */
  private settle(name: string): void {
    const state = this.states.get(name);
    if (state !== 'waiting' && !(state === 'running' && this.node(name).kind === 'join')) return;
    if (!this.incoming(name).every((s) => s === 'dropped')) return;
    this.states.set(name, 'dead');
    for (const edge of this.node(name).children) {
      this.edges.set(edgeKey(name, edge.node), 'dropped');
      this.settle(edge.node);
    }
  }

  private deliver(from: string, edge: PlannedEdge, input: P): Step<P>[] {
    const to = this.node(edge.node);
    const data = to.data === 'request' ? this.request : input;
    if (to.kind !== 'join') {
      this.states.set(to.name, 'running');
      return [{ kind: 'call', node: to.name, from, edge, input: data }];
    }
    // A join that has fired takes nothing more; an `any` join fires on its first input.
    if (this.states.get(to.name) === 'done') return [];
    this.states.set(to.name, 'running');
    const pending = to.join?.type === 'any' ? 0 : this.bound(to.name) - 1;
    this.told.set(to.name, Math.min(this.told.get(to.name) ?? Infinity, pending + 1));
    return [{ kind: 'join-input', node: to.name, from, edge, input: data, pending }];
  }

  /** Joins told a looser bound than they now have, that are still waiting for inputs. */
  private boundSteps(sentNow: ReadonlySet<string>): Step<P>[] {
    const steps: Step<P>[] = [];
    for (const [join, told] of this.told) {
      const bound = this.bound(join);
      if (this.states.get(join) !== 'running' || sentNow.has(join) || bound >= told) continue;
      this.told.set(join, bound);
      steps.push({ kind: 'join-bound', node: join, inputs: bound });
    }
    return steps;
  }
}

export { GraphRun, graphShape };
export type { Step, NodeState, GraphShape };
