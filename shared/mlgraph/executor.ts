/**
 * The graph executor (seed 003's "request management"): one predict request walks the graph.
 * GraphRun decides what comes next; this file makes the calls — routers decide (the route
 * contract, `mlgraph-route`), models answer (OIP v2, JSON or binary tensors passed on as bytes),
 * joins gather (the join contract, with `mlgraph-pending-requests` from the routes taken and not
 * taken) — concurrently wherever the graph forks. A Hard step's failure fails the request with
 * that step's status and message, and stops the others; a Soft one is skipped and the answer
 * says so. No call waits past the request's deadline. The routers a prediction went through are
 * recorded, so that a reward for it reaches each of them (once: each router keeps it per id).
 */
import { randomUUID } from 'node:crypto';
import { NotFoundError, StepError, UnavailableError } from '../errors/index.js';
import { headers as names } from '../messages/mlgraph.js';
import type { GraphPlan, PlannedEdge, PlannedNode } from '../messages/graph-plan.js';
import { GraphRun, graphShape } from './graph-run.js';
import type { GraphShape, Step } from './graph-run.js';
import { StepFailure, callNode } from './node-call.js';
import type { CallAnswer } from './node-call.js';
import { endpoint } from '../http/index.js';
import type { HttpSend } from '../http/index.js';
import type { PathStore } from './path-store.js';
import type { Router } from './router.js';
import type { OutlierNode, OutlierScore } from './outlier-node.js';
import {
  answerAsRequest,
  asJson,
  headText,
  jsonHead,
  jsonPayload,
  jsonText,
  sendable,
} from './payload.js';
import { learns } from './strategies.js';
import type { Payload } from './payload.js';

/** How a step ended, for the per-node metrics. */
type StepOutcome = 'ok' | 'skipped' | 'failed';

interface ExecutorDeps {
  plan: GraphPlan;
  /** The built-in outlier nodes, by node. */
  outliers: ReadonlyMap<string, OutlierNode>;
  /** The built-in routers, by node: run here, on the state their Services share. */
  routers: ReadonlyMap<string, Router>;
  send: HttpSend;
  paths: PathStore;
  now: () => number;
  newPuid?: () => string;
  /** Each call to a node: its latency and how it ended. */
  observe?(node: string, outcome: StepOutcome, seconds: number): void;
}

interface Prediction {
  puid: string;
  answer: Payload;
  /** Nodes skipped after a Soft failure. */
  skipped: string[];
  /** Nodes that answered, in the order they did. */
  ran: string[];
  /** A join handed out before all its inputs came (an outer join's window). */
  partial: boolean;
  /** What the outlier nodes on the path said. */
  outliers: Array<{ node: string } & OutlierScore>;
}

interface PredictOptions {
  puid?: string | undefined;
  traceparent: string;
  /** The caller's own remaining budget (`mlgraph-timeout-ms`), if shorter than the graph's. */
  timeoutMs?: number | undefined;
}

const headerTimeout = 'mlgraph-timeout-ms';
const headerRoutable = 'mlgraph-routable-nodes';
const headerOutlier = 'mlgraph-outlier-score';

/** `node=score` pairs, comma-separated: the header the scores travel in. */
function outlierHeader(scores: ReadonlyArray<{ node: string; score: number }>): string {
  return scores.map((s) => `${s.node}=${Number(s.score.toPrecision(6))}`).join(',');
}

/** One request's walk: the calls in flight, the run's state, and how it ends. */
class GraphExecution {
  private readonly run: GraphRun<Payload>;
  private readonly nodes: ReadonlyMap<string, PlannedNode>;
  private readonly abort = new AbortController();
  private readonly ran: string[] = [];
  private readonly windows = new Map<string, NodeJS.Timeout>();
  /** Outlier scores so far: they travel with the request to every later hop and the answer. */
  readonly outliers: Array<{ node: string } & OutlierScore> = [];
  /** The path as it grows, written while the rest of the graph runs; awaited before answering. */
  readonly recordings: Promise<void>[] = [];
  private inFlight = 0;
  private partial = false;
  private settle!: { resolve: () => void; reject: (error: unknown) => void };

  constructor(
    private readonly deps: ExecutorDeps & { shape: GraphShape },
    request: Payload,
    private readonly puid: string,
    private readonly traceparent: string,
    private readonly deadline: number,
  ) {
    this.run = new GraphRun(deps.shape, request);
    this.nodes = deps.shape.nodes;
  }

  async walk(): Promise<Prediction> {
    const done = new Promise<void>((resolve, reject) => (this.settle = { resolve, reject }));
    this.dispatch(this.run.start());
    try {
      await done;
    } finally {
      // Calls still out (a failed step's siblings, a late input) stop now. Only then: an abort
      // costs an exception object and an event on every request otherwise.
      if (this.inFlight > 0) this.abort.abort();
      for (const timer of this.windows.values()) clearTimeout(timer);
    }
    return {
      puid: this.puid,
      answer: this.answer(),
      skipped: this.run.skipped(),
      ran: this.ran,
      partial: this.partial,
      outliers: this.outliers,
    };
  }

  /** Keeps `router` on this prediction's path (for its reward), not holding up the walk. */
  private recordPath(router: string): void {
    const recording = this.deps.paths.record(this.puid, [router]);
    // Awaited (and its failure answered) in predict; this only stops an early unhandled rejection.
    recording.catch(() => {});
    this.recordings.push(recording);
  }

  private dispatch(steps: readonly Step<Payload>[]): void {
    for (const step of steps) {
      this.inFlight += 1;
      this.execute(step).then(
        (next) => {
          this.inFlight -= 1;
          this.dispatch(next);
          this.settleIfDone();
        },
        (error: unknown) => this.settle.reject(error),
      );
    }
  }

  /** Done when nothing is in flight, or when what is cannot change the answer any more. */
  private settleIfDone(): void {
    if (this.inFlight === 0 || this.run.finished()) this.settle.resolve();
  }

  private async execute(step: Step<Payload>): Promise<Step<Payload>[]> {
    const edge = step.kind === 'join-bound' ? undefined : step.edge;
    const started = this.deps.now();
    try {
      const next = await this.perform(step);
      this.deps.observe?.(step.node, 'ok', (this.deps.now() - started) / 1000);
      return next;
    } catch (error) {
      if (!(error instanceof StepFailure)) throw error;
      const soft = edge?.dependency === 'Soft' && step.kind !== 'join-bound';
      this.deps.observe?.(
        step.node,
        soft ? 'skipped' : 'failed',
        (this.deps.now() - started) / 1000,
      );
      if (soft) return this.run.failedSoftly(step.from, step.node);
      throw new StepError(`node ${step.node}: ${error.message}`, error.status, { cause: error });
    }
  }

  private async perform(step: Step<Payload>): Promise<Step<Payload>[]> {
    const node = this.nodes.get(step.node)!;
    if (step.kind === 'join-input') return this.joinInput(node, step);
    if (step.kind === 'join-bound') {
      const answer = await this.call(node, undefined, `joins/${this.puid}/bound`, {
        body: JSON.stringify({ inputs: step.inputs }),
        headers: { 'content-type': 'application/json' },
      });
      return answer.status === 200 ? this.fired(node, answer.payload) : [];
    }
    if (node.kind === 'router') return this.route(node, step.edge, step.input);
    if (node.kind === 'outlier') return this.scoreOutlier(node, step.edge, step.input);
    const path =
      node.kind === 'model'
        ? `v2/models/${encodeURIComponent(node.model!.name)}${node.model!.version === undefined ? '' : `/versions/${encodeURIComponent(node.model!.version)}`}/infer`
        : '';
    const input = node.kind === 'model' ? answerAsRequest(step.input) : step.input;
    const answer = await this.call(node, step.edge, path, sendable(input));
    this.ran.push(node.name);
    if (node.kind === 'model') answer.payload.answer = true;
    return this.run.completed(node.name, answer.payload);
  }

  /** An outlier node: the score goes with the request, which goes on unchanged. */
  private async scoreOutlier(node: PlannedNode, edge: PlannedEdge | undefined, input: Payload) {
    const builtin = this.deps.outliers.get(node.name);
    let scored: OutlierScore;
    if (builtin !== undefined) scored = builtin.score(input);
    else {
      const answer = await this.call(node, edge, '', {
        body: headText(input),
        headers: { 'content-type': 'application/json' },
      });
      const body = (answer.payload.kind === 'json' ? answer.payload.value : undefined) as
        { score?: unknown; outlier?: unknown } | undefined;
      if (typeof body?.score !== 'number')
        throw new StepFailure(502, 'the scorer answered no {"score": number}', false);
      scored = { score: body.score, outlier: body.outlier === true };
    }
    this.outliers.push({ node: node.name, ...scored });
    this.ran.push(node.name);
    return this.run.completed(node.name, input);
  }

  private async route(node: PlannedNode, edge: PlannedEdge | undefined, input: Payload) {
    const builtin = this.deps.routers.get(node.name);
    if (builtin !== undefined) {
      // Only conditions read the body: the others need not parse it.
      const reads = node.router?.strategy.kind === 'condition';
      const { route } = await builtin.predict({
        puid: this.puid,
        body: reads ? jsonHead(input) : undefined,
      });
      // A built-in router keeps each prediction's route itself, where its reward finds it.
      this.ran.push(node.name);
      return this.run.completed(node.name, input, route);
    }
    const children = node.children.map((c) => c.node);
    const answer = await this.call(node, edge, 'predict', {
      body: headText(input),
      headers: { 'content-type': 'application/json', [headerRoutable]: children.join(',') },
    });
    const route = (answer.header(names.route) ?? '').split(',').filter((c) => c !== '');
    const unknown = route.filter((c) => !children.includes(c));
    if (unknown.length > 0)
      throw new StepFailure(502, `routed to ${unknown.join(', ')}, not among its children`, false);
    this.ran.push(node.name);
    this.recordPath(node.name);
    return this.run.completed(node.name, input, route);
  }

  private async joinInput(node: PlannedNode, step: Extract<Step<Payload>, { kind: 'join-input' }>) {
    if (node.join?.type === 'outer' && !this.windows.has(node.name)) this.openWindow(node);
    const answer = await this.call(node, step.edge, 'predict', {
      body: jsonText(step.input),
      headers: {
        'content-type': 'application/json',
        [names.source]: step.from,
        [names.pendingRequests]: String(step.pending),
      },
    });
    return answer.status === 200 ? this.fired(node, answer.payload) : [];
  }

  /** An outer join: after its window, what it holds goes on, marked partial. */
  private openWindow(node: PlannedNode): void {
    this.inFlight += 1;
    const timer = setTimeout(() => {
      if (this.run.state(node.name) === 'done') {
        this.inFlight -= 1;
        this.settleIfDone();
        return;
      }
      this.partial = true;
      this.call(node, undefined, `joins/${this.puid}`, { headers: {} }, 'GET').then(
        (answer) => {
          this.inFlight -= 1;
          this.dispatch(this.fired(node, answer.payload));
          this.settleIfDone();
        },
        (error: unknown) =>
          this.settle.reject(
            error instanceof StepFailure
              ? new StepError(`node ${node.name}: ${error.message}`, error.status)
              : error,
          ),
      );
    }, node.join!.windowMs);
    this.windows.set(node.name, timer);
  }

  private fired(node: PlannedNode, output: Payload): Step<Payload>[] {
    if (this.run.state(node.name) === 'done') return [];
    this.ran.push(node.name);
    const value = output.kind === 'json' ? (output.value as { partial?: unknown } | null) : null;
    if (value?.partial === true) this.partial = true;
    return this.run.completed(node.name, output);
  }

  private call(
    node: PlannedNode,
    edge: PlannedEdge | undefined,
    path: string,
    message: { body?: Buffer | string; headers: Record<string, string> },
    method: 'GET' | 'POST' = 'POST',
  ): Promise<CallAnswer> {
    return callNode(this.deps.send, endpoint(node.url!, path), {
      method,
      ...(message.body === undefined ? {} : { body: message.body }),
      headers: {
        ...message.headers,
        traceparent: this.traceparent,
        [names.puid]: this.puid,
        ...(this.outliers.length === 0 ? {} : { [headerOutlier]: outlierHeader(this.outliers) }),
        [headerTimeout]: String(Math.max(0, Math.floor(this.deadline - this.deps.now()))),
      },
      signal: this.abort.signal,
      retries: edge?.retries ?? 0,
      attemptMs: edge?.timeoutMs,
      deadline: this.deadline,
      now: this.deps.now,
    });
  }

  /** The one answer: the last node's, or each last node's by name. */
  private answer(): Payload {
    const results = this.run.results();
    if (results.size === 1) return [...results.values()][0]!;
    if (results.size === 0) {
      const skipped = this.run.skipped();
      throw new StepError(
        `no node of the graph answered${skipped.length === 0 ? '' : ` (skipped: ${skipped.join(', ')})`}`,
        502,
      );
    }
    return jsonPayload(Object.fromEntries([...results].map(([n, p]) => [n, asJson(p)])));
  }
}

interface Executor {
  predict(request: Payload, options: PredictOptions): Promise<Prediction>;
  /** Sends the reward to every router on the prediction's path; says what each did. */
  reward(puid: string, reward: number): Promise<{ puid: string; routers: Record<string, string> }>;
}

function createExecutor(deps: ExecutorDeps): Executor {
  const newPuid = deps.newPuid ?? randomUUID;
  const shaped = { ...deps, shape: graphShape(deps.plan) };
  const byName = shaped.shape.nodes;
  const learning = [...deps.routers].filter(([name]) => {
    const strategy = byName.get(name)?.router?.strategy;
    return strategy !== undefined && learns(strategy);
  });
  return {
    async predict(request, options) {
      const budget = Math.min(deps.plan.timeoutMs, options.timeoutMs ?? Infinity);
      const puid = options.puid ?? newPuid();
      const execution = new GraphExecution(
        shaped,
        request,
        puid,
        options.traceparent,
        deps.now() + budget,
      );
      const prediction = await execution.walk();
      // Before answering: a reward may follow the answer at once.
      await Promise.all(execution.recordings);
      return prediction;
    },
    async reward(puid, reward) {
      // A built-in learning router that knows the prediction was on its path (it keeps each
      // prediction's route); the routers of your own on it were written down.
      const [here, remote] = await Promise.all([
        Promise.all(learning.map(([name, router]) => rewardHere(router, name, puid, reward))),
        deps.paths.routers(puid),
      ]);
      const outcomes = [
        ...here.filter((o) => o.outcome !== 'unknown'),
        ...(await Promise.all(
          remote.map((name) => rewardOne(deps, byName.get(name), puid, reward)),
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
    },
  };
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
  deps: ExecutorDeps,
  node: PlannedNode | undefined,
  puid: string,
  reward: number,
) {
  const name = node?.name ?? '?';
  if (node?.url === undefined)
    return { name, outcome: 'not in this graph any more', failed: false };
  try {
    const answer = await callNode(deps.send, endpoint(node.url, 'reward'), {
      method: 'POST',
      body: JSON.stringify({ puid, reward }),
      headers: { 'content-type': 'application/json' },
      signal: new AbortController().signal,
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

export { createExecutor, headerTimeout, headerOutlier, outlierHeader };
export type { Executor, Prediction, StepOutcome };
