/**
 * The graph executor (seed 003's "request management"): one predict request walks the graph.
 * GraphRun decides what comes next; this file makes the calls — routers decide (built in, or the
 * route contract, `mlgraph-route`), models answer (OIP v2, JSON or binary tensors passed on as
 * bytes), joins gather (built in: here, from the answers this request holds, spliced without
 * parsing; a join of your own: the join contract, with `mlgraph-pending-requests` from the
 * routes taken and not taken) — concurrently wherever the graph forks. A Hard step's failure
 * fails the request with that step's status and message, and stops the others; a Soft one is
 * skipped and the answer says so. No call waits past the request's deadline. The routers a
 * prediction went through are recorded, so that a reward for it reaches each of them (once:
 * each router keeps it per id).
 */
import { randomUUID } from 'node:crypto';
import { StepError } from '../errors/index.js';
import { headers as names } from '../messages/mlgraph.js';
import type { GraphPlan, PlannedEdge } from '../messages/graph-plan.js';
import { GraphRun, graphShape } from './graph-run.js';
import type { GraphShape, Step } from './graph-run.js';
import { graphNodes } from './graph-nodes.js';
import type { GraphNode, NodeOf } from './graph-nodes.js';
import { JoinGather } from './join-gather.js';
import { joinedAnswer, looksLikeJson, spliceObject } from './join-answer.js';
import { StepFailure, callNode } from './node-call.js';
import type { CallAnswer } from './node-call.js';
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
  splicePart,
  splicedPayload,
} from './payload.js';
import type { Payload } from './payload.js';
import { rewardRouters } from './executor-rewards.js';

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
const headerOutlier = 'mlgraph-outlier-score';
const jsonType = { 'content-type': 'application/json' } as const;

/** `node=score` pairs, comma-separated: the header the scores travel in. */
function outlierHeader(scores: ReadonlyArray<{ node: string; score: number }>): string {
  return scores.map((s) => `${s.node}=${Number(s.score.toPrecision(6))}`).join(',');
}

/** What every request of one graph version shares. */
interface Shared extends ExecutorDeps {
  shape: GraphShape;
  nodes: ReadonlyMap<string, GraphNode>;
}

type JoinInput = Extract<Step<Payload>, { kind: 'join-input' }>;

/** One request's walk: the calls in flight, the run's state, and how it ends. */
class GraphExecution {
  private readonly run: GraphRun<Payload>;
  /** Made when two calls are first in flight at once: a lone call has no sibling to stop. */
  private abort: AbortController | undefined;
  private readonly ran: string[] = [];
  /** The built-in joins' inputs so far, by join. */
  private readonly joins = new Map<string, JoinGather<Payload>>();
  /** The outer joins' windows still running, and every window opened. */
  private readonly windows = new Map<string, NodeJS.Timeout>();
  private readonly opened = new Set<string>();
  /** Outlier scores so far: they travel with the request to every later hop and the answer. */
  readonly outliers: Array<{ node: string } & OutlierScore> = [];
  /** The path as it grows, written while the rest of the graph runs; awaited before answering. */
  readonly recordings: Promise<void>[] = [];
  private inFlight = 0;
  /** HTTP calls out now (steps in flight include built-in joins, which call nothing). */
  private calling = 0;
  private partial = false;
  private settle!: { resolve: () => void; reject: (error: unknown) => void };

  constructor(
    private readonly deps: Shared,
    private readonly request: Payload,
    private readonly puid: string,
    /** The prediction id was made here: no earlier route can exist for it. */
    private readonly fresh: boolean,
    private readonly traceparent: string,
    private readonly deadline: number,
  ) {
    this.run = new GraphRun(deps.shape, request);
  }

  async walk(): Promise<Prediction> {
    const done = new Promise<void>((resolve, reject) => (this.settle = { resolve, reject }));
    this.dispatch(this.run.start());
    try {
      await done;
    } finally {
      // Calls still out (a failed step's siblings, a late input) stop now. Only then: an abort
      // costs an exception object and an event.
      if (this.calling > 0) this.abort?.abort();
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

  private node(name: string): GraphNode {
    const node = this.deps.nodes.get(name);
    if (node === undefined) throw new Error(`graph run named ${name}, not a node of the plan`);
    return node;
  }

  /** Keeps `router` on this prediction's path (for its reward), not holding up the walk. */
  private recordPath(router: string): void {
    this.keep(this.deps.paths.record(this.puid, [router]));
  }

  /** A write the answer waits for, not the walk. */
  private keep(recording: Promise<void>): void {
    // Awaited (and its failure answered) in predict; this only stops an early unhandled rejection.
    recording.catch(() => {});
    this.recordings.push(recording);
  }

  private dispatch(steps: readonly Step<Payload>[]): void {
    // Counted first: a call knows whether siblings are in flight beside it.
    this.inFlight += steps.length;
    for (const step of steps) {
      this.execute(step).then(
        (next) => {
          this.inFlight -= 1;
          if (next.length > 0) this.dispatch(next);
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
    const node = this.node(step.node);
    if (step.kind === 'join-input') {
      if (node.kind === 'join') return this.gather(node, step);
      if (node.kind === 'remote-join') return this.joinRemotely(node, step);
      throw new Error(`node ${node.name} is not a join`);
    }
    if (step.kind === 'join-bound') return this.tighten(node, step.inputs);
    const { edge, input } = step;
    switch (node.kind) {
      case 'router':
        return this.route(node, input);
      case 'remote-router':
        return this.routeRemotely(node, edge, input);
      case 'outlier':
        return this.scored(node, input, node.detector.score(input));
      case 'remote-outlier':
        return this.scoreRemotely(node, edge, input);
      case 'model': {
        const answer = await this.call(node.inferUrl, edge, sendable(answerAsRequest(input)));
        this.ran.push(node.name);
        answer.payload.answer = true;
        return this.run.completed(node.name, answer.payload);
      }
      case 'transform': {
        const answer = await this.call(node.url, edge, sendable(input));
        this.ran.push(node.name);
        return this.run.completed(node.name, answer.payload);
      }
      default:
        throw new Error(`node ${node.name}: a ${node.kind} is reached by its inputs`);
    }
  }

  /** A route not taken lowered a join's bound after its inputs went. */
  private async tighten(node: GraphNode, inputs: number): Promise<Step<Payload>[]> {
    if (node.kind === 'join') {
      const join = this.joins.get(node.name);
      return join?.tighten(inputs) === true ? this.fireJoin(node, join, false) : [];
    }
    if (node.kind !== 'remote-join') throw new Error(`node ${node.name} is not a join`);
    const answer = await this.call(
      `${node.joinsUrl}${encodeURIComponent(this.puid)}/bound`,
      undefined,
      { body: JSON.stringify({ inputs }), headers: jsonType },
    );
    return answer.status === 200 ? this.firedRemotely(node, answer.payload) : [];
  }

  /** An outlier node: the score goes with the request, which goes on unchanged. */
  private scored(node: GraphNode, input: Payload, scored: OutlierScore) {
    this.outliers.push({ node: node.name, ...scored });
    this.ran.push(node.name);
    return this.run.completed(node.name, input);
  }

  private async scoreRemotely(
    node: NodeOf<'remote-outlier'>,
    edge: PlannedEdge | undefined,
    input: Payload,
  ) {
    const answer = await this.call(node.url, edge, { body: headText(input), headers: jsonType });
    const body = (answer.payload.kind === 'json' ? answer.payload.value : undefined) as
      { score?: unknown; outlier?: unknown } | undefined;
    if (typeof body?.score !== 'number')
      throw new StepFailure(502, 'the scorer answered no {"score": number}', false);
    return this.scored(node, input, { score: body.score, outlier: body.outlier === true });
  }

  private async route(node: NodeOf<'router'>, input: Payload) {
    const { route, recorded } = await node.router.predict({
      puid: this.puid,
      body: node.reads ? jsonHead(input) : undefined,
      fresh: this.fresh,
    });
    // A new prediction's route is written while the request goes on; kept before answering.
    if (recorded !== undefined) this.keep(recorded);
    // A built-in router keeps each prediction's route itself, where its reward finds it.
    this.ran.push(node.name);
    return this.run.completed(node.name, input, route);
  }

  private async routeRemotely(
    node: NodeOf<'remote-router'>,
    edge: PlannedEdge | undefined,
    input: Payload,
  ) {
    const answer = await this.call(node.predictUrl, edge, {
      body: headText(input),
      headers: node.headers,
    });
    const route = (answer.header(names.route) ?? '').split(',').filter((c) => c !== '');
    const unknown = route.filter((c) => !node.children.some((e) => e.node === c));
    if (unknown.length > 0)
      throw new StepFailure(502, `routed to ${unknown.join(', ')}, not among its children`, false);
    this.ran.push(node.name);
    this.recordPath(node.name);
    return this.run.completed(node.name, input, route);
  }

  /** A built-in join: the input is kept; the one that meets the bound fires the join. */
  private gather(node: NodeOf<'join'>, step: JoinInput): Step<Payload>[] {
    if (this.run.state(node.name) === 'done') return [];
    if (step.input.kind === 'json' && !looksLikeJson(headText(step.input)))
      throw new StepFailure(502, `the answer of ${step.from} is not JSON: nothing to join`, false);
    let join = this.joins.get(node.name);
    if (join === undefined) {
      const fresh = new JoinGather<Payload>();
      this.joins.set(node.name, fresh);
      if (node.type === 'outer' && node.windowMs !== undefined)
        this.openWindow(node.name, node.windowMs, () => this.fireJoin(node, fresh, true));
      join = fresh;
    }
    return join.add(step.from, step.input, step.pending) ? this.fireJoin(node, join, false) : [];
  }

  /** A built-in join's answer, spliced from its inputs' bytes (join-answer.ts). */
  private fireJoin(
    node: NodeOf<'join'>,
    join: JoinGather<Payload>,
    partial: boolean,
  ): Step<Payload>[] {
    if (this.run.state(node.name) === 'done') return [];
    this.closeWindow(node.name);
    if (partial) this.partial = true;
    const parts = [...join.inputs()].map(([source, p]) => ({ source, ...splicePart(p) }));
    const answer = joinedAnswer(
      { puid: this.puid, partial, missing: partial ? join.missing() : 0 },
      parts,
    );
    this.ran.push(node.name);
    return this.run.completed(node.name, splicedPayload(answer));
  }

  private async joinRemotely(node: NodeOf<'remote-join'>, step: JoinInput) {
    if (node.type === 'outer' && node.windowMs !== undefined && !this.opened.has(node.name))
      this.openWindow(node.name, node.windowMs, () => this.handOutRemotely(node));
    // A join of your own takes JSON (the contract): a binary answer goes with its tensors decoded.
    const answer = await this.call(node.predictUrl, step.edge, {
      body: jsonText(step.input),
      headers: {
        ...jsonType,
        [names.source]: step.from,
        [names.pendingRequests]: String(step.pending),
      },
    });
    return answer.status === 200 ? this.firedRemotely(node, answer.payload) : [];
  }

  /** A remote outer join at its window: what it holds, read from it. */
  private async handOutRemotely(node: NodeOf<'remote-join'>): Promise<Step<Payload>[]> {
    this.partial = true;
    const answer = await this.call(`${node.joinsUrl}${encodeURIComponent(this.puid)}`, undefined, {
      headers: {},
      method: 'GET',
    });
    return this.firedRemotely(node, answer.payload);
  }

  /** An outer join: after its window, what it holds goes on, marked partial. */
  private openWindow(
    name: string,
    windowMs: number,
    handOut: () => Step<Payload>[] | Promise<Step<Payload>[]>,
  ): void {
    // Counted as in flight: the request is not over while the window may still hand out.
    this.inFlight += 1;
    this.opened.add(name);
    const timer = setTimeout(() => {
      this.windows.delete(name);
      if (this.run.state(name) === 'done') {
        this.inFlight -= 1;
        this.settleIfDone();
        return;
      }
      Promise.resolve()
        .then(handOut)
        .then(
          (next) => {
            this.inFlight -= 1;
            if (next.length > 0) this.dispatch(next);
            this.settleIfDone();
          },
          (error: unknown) =>
            this.settle.reject(
              error instanceof StepFailure
                ? new StepError(`node ${name}: ${error.message}`, error.status)
                : error,
            ),
        );
    }, windowMs);
    this.windows.set(name, timer);
  }

  /** A join done before its window ended: the window goes. */
  private closeWindow(name: string): void {
    const timer = this.windows.get(name);
    if (timer === undefined) return;
    clearTimeout(timer);
    this.windows.delete(name);
    this.inFlight -= 1;
  }

  private firedRemotely(node: NodeOf<'remote-join'>, output: Payload): Step<Payload>[] {
    if (this.run.state(node.name) === 'done') return [];
    this.closeWindow(node.name);
    this.ran.push(node.name);
    const value = output.kind === 'json' ? (output.value as { partial?: unknown } | null) : null;
    if (value?.partial === true) this.partial = true;
    return this.run.completed(node.name, output);
  }

  private call(
    url: string,
    edge: PlannedEdge | undefined,
    message: {
      body?: Buffer | string;
      headers: Readonly<Record<string, string>>;
      method?: 'GET' | 'POST';
    },
  ): Promise<CallAnswer> {
    const { now } = this.deps;
    // A lone call has nothing to stop beside it; two at once get a signal to stop the other.
    if (this.inFlight > 1 && this.abort === undefined) this.abort = new AbortController();
    const headers: Record<string, string> = {
      ...message.headers,
      traceparent: this.traceparent,
      [names.puid]: this.puid,
      [headerTimeout]: String(Math.max(0, Math.floor(this.deadline - now()))),
    };
    if (this.outliers.length > 0) headers[headerOutlier] = outlierHeader(this.outliers);
    this.calling += 1;
    const done = () => (this.calling -= 1);
    const call = callNode(this.deps.send, url, {
      method: message.method ?? 'POST',
      ...(message.body === undefined ? {} : { body: message.body }),
      headers,
      signal: this.abort?.signal,
      retries: edge?.retries ?? 0,
      attemptMs: edge?.timeoutMs,
      deadline: this.deadline,
      now,
    });
    call.then(done, done);
    return call;
  }

  /**
   * The one answer: the last node's, or each last node's by name (spliced). JSON when the
   * caller sent JSON; binary tensors stay binary only for a caller that sent them.
   */
  private answer(): Payload {
    const results = this.run.results();
    if (results.size === 0) {
      const skipped = this.run.skipped();
      throw new StepError(
        `no node of the graph answered${skipped.length === 0 ? '' : ` (skipped: ${skipped.join(', ')})`}`,
        502,
      );
    }
    const answer =
      results.size === 1
        ? [...results.values()][0]!
        : splicedPayload(
            spliceObject([...results].map(([name, p]) => ({ name, ...splicePart(p) }))),
          );
    if (answer.kind === 'binary' && this.request.kind === 'json')
      return jsonPayload(asJson(answer));
    return answer;
  }
}

interface Executor {
  predict(request: Payload, options: PredictOptions): Promise<Prediction>;
  /** Sends the reward to every router on the prediction's path; says what each did. */
  reward(puid: string, reward: number): Promise<{ puid: string; routers: Record<string, string> }>;
}

function createExecutor(deps: ExecutorDeps): Executor {
  const newPuid = deps.newPuid ?? randomUUID;
  const nodes = graphNodes(deps.plan, deps);
  const shared: Shared = { ...deps, shape: graphShape(deps.plan), nodes };
  return {
    async predict(request, options) {
      const budget = Math.min(deps.plan.timeoutMs, options.timeoutMs ?? Infinity);
      const puid = options.puid ?? newPuid();
      const execution = new GraphExecution(
        shared,
        request,
        puid,
        options.puid === undefined,
        options.traceparent,
        deps.now() + budget,
      );
      const prediction = await execution.walk();
      // Before answering: a reward may follow the answer at once.
      if (execution.recordings.length > 0) await Promise.all(execution.recordings);
      return prediction;
    },
    reward: (puid, reward) => rewardRouters(deps, nodes, puid, reward),
  };
}

export { createExecutor, headerTimeout, headerOutlier, outlierHeader };
export type { Executor, Prediction, StepOutcome };
