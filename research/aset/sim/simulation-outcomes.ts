/**
 * The simulator's bookkeeping of outcomes (simulator.ts): every query outcome is counted at once
 * for the whole run, the current window, the current sample period and its app, and a rejected
 * stream's queries are counted as their send times pass.
 */

import type { Outcomes } from '../../../shared/aset/window.js';

/** A run's counts so far (`Simulation.totals`). */
interface Totals extends Outcomes {
  /** Per Table I app (by name), in order of first arrival. */
  readonly perApp: Readonly<Record<string, Outcomes>>;
  /** Streams that arrived, were bound, were rejected. */
  readonly streams: { readonly arrived: number; readonly bound: number; readonly rejected: number };
  /** Queries of arrived streams: sum of their query counts, whether sent yet or not. */
  readonly queriesOffered: number;
  /** Queries sent to a worker and not yet resolved. */
  readonly inFlight: number;
  /**
   * QoS failures whose network time ran over what constraint (3) budgets for it, 2 (d + 2 sigma)
   * (for a query dropped before processing: its way up alone ran over d + 2 sigma). The rest
   * were late through queueing or processing.
   */
  readonly networkLate: number;
}

/** A rejected stream whose queries are not all counted yet. */
interface RejectedStream {
  start: number;
  period: number;
  queries: number;
  counted: number;
  app: number;
}

const noOutcomes = (): Outcomes => ({ success: 0, qosFailure: 0, rejected: 0 });

/** Outcome counts by scope (run, window, sample period, app) and stream counts, kept in step. */
class OutcomeLedger {
  private readonly total = noOutcomes();
  private readonly window = noOutcomes();
  private readonly period = noOutcomes();
  private readonly appNames: string[] = [];
  private readonly appIndex = new Map<string, number>();
  private readonly appOutcomes: Outcomes[] = [];
  private readonly streamTotals = { arrived: 0, bound: 0, rejected: 0 };
  private queriesOffered = 0;
  private networkLate = 0;
  private readonly rejectedStreams: RejectedStream[] = [];

  /**
   * An independent ledger with the same counts in every scope, the same apps in the same order,
   * and the same rejected streams pending (in the same order, each with its count so far).
   */
  clone(): OutcomeLedger {
    const copy = new OutcomeLedger();
    Object.assign(copy.total, this.total);
    Object.assign(copy.window, this.window);
    Object.assign(copy.period, this.period);
    this.appNames.forEach((name, i) => {
      copy.appOf(name);
      Object.assign(copy.appOutcomes[i]!, this.appOutcomes[i]!);
    });
    Object.assign(copy.streamTotals, this.streamTotals);
    copy.queriesOffered = this.queriesOffered;
    copy.networkLate = this.networkLate;
    for (const r of this.rejectedStreams) copy.rejectedStreams.push({ ...r });
    return copy;
  }

  /** The index of app `name`, registering it on its first stream. */
  appOf(name: string): number {
    let index = this.appIndex.get(name);
    if (index === undefined) {
      index = this.appNames.length;
      this.appIndex.set(name, index);
      this.appNames.push(name);
      this.appOutcomes.push(noOutcomes());
    }
    return index;
  }

  /** A stream of `queries` queries arrived. */
  arrived(queries: number): void {
    this.streamTotals.arrived += 1;
    this.queriesOffered += queries;
  }

  /** An arrived stream was bound to a worker. */
  bound(): void {
    this.streamTotals.bound += 1;
  }

  /** A stream arriving at `start` was rejected: its queries count as their send times pass. */
  rejectStream(start: number, period: number, queries: number, app: number): void {
    this.streamTotals.rejected += 1;
    this.rejectedStreams.push({ start, period, queries, counted: 0, app });
  }

  /** A response of `app` came back within D^i. */
  success(app: number): void {
    this.total.success += 1;
    this.window.success += 1;
    this.period.success += 1;
    this.appOutcomes[app]!.success += 1;
  }

  /**
   * A query of `app` came back late, or was dropped as already past D^i; `networkLate` when its
   * network time ran over its budget (see `Totals.networkLate`).
   */
  qosFailure(app: number, networkLate: boolean): void {
    if (networkLate) this.networkLate += 1;
    this.total.qosFailure += 1;
    this.window.qosFailure += 1;
    this.period.qosFailure += 1;
    this.appOutcomes[app]!.qosFailure += 1;
  }

  /** Counts the rejected streams' queries sent up to and including `t`. */
  flushRejected(t: number): void {
    const rejectedStreams = this.rejectedStreams;
    for (let i = rejectedStreams.length - 1; i >= 0; i -= 1) {
      const r = rejectedStreams[i]!;
      const sent = Math.min(r.queries, Math.floor((t - r.start) / r.period) + 1);
      if (sent > r.counted) {
        this.rejected(r.app, sent - r.counted);
        r.counted = sent;
      }
      if (r.counted === r.queries) {
        rejectedStreams[i] = rejectedStreams[rejectedStreams.length - 1]!;
        rejectedStreams.pop();
      }
    }
  }

  /** The sample period's counts, which start again from zero. */
  takePeriod(): Outcomes {
    const taken = { ...this.period };
    this.period.success = 0;
    this.period.qosFailure = 0;
    this.period.rejected = 0;
    return taken;
  }

  /** The window's counts, which start again from zero. */
  takeWindow(): Outcomes {
    const taken = { ...this.window };
    this.window.success = 0;
    this.window.qosFailure = 0;
    this.window.rejected = 0;
    return taken;
  }

  /** The run's counts so far, with `inFlight` queries unresolved. */
  totals(inFlight: number): Totals {
    const perApp: Record<string, Outcomes> = {};
    this.appNames.forEach((name, i) => (perApp[name] = { ...this.appOutcomes[i]! }));
    return {
      ...this.total,
      perApp,
      streams: { ...this.streamTotals },
      queriesOffered: this.queriesOffered,
      inFlight,
      networkLate: this.networkLate,
    };
  }

  /** `count` queries of a rejected stream of `app` reached their send time. */
  private rejected(app: number, count: number): void {
    this.total.rejected += count;
    this.window.rejected += count;
    this.period.rejected += count;
    this.appOutcomes[app]!.rejected += count;
  }
}

export { OutcomeLedger };
export type { Totals };
