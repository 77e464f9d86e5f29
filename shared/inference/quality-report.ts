/**
 * What the edge says of its own quality, in the WorkerMessage's terms (shared/crds's schema, so
 * the report upstream and the `/skew` answer are one shape): the objective and its estimates, the
 * shadow rate, and the drift test. Seed 003's Skew request ("Current skew estimate") is this.
 */
import type { WorkerQuality } from '../crds/index.js';
import { cutHardness } from './objective.js';
import type { QualityWindow } from './quality-window.js';

interface QualitySettings {
  /** Points; undefined without an objective. */
  objective: number | undefined;
  shadowRate: number;
  /** The drift test's raise threshold. */
  raiseAt: number;
}

const round = (v: number, digits = 6) => Number(v.toFixed(digits));

function qualityReport(window: QualityWindow, settings: QualitySettings): WorkerQuality {
  const { estimate, drift, driftInputs } = window.state();
  const report: WorkerQuality = {};
  if (settings.objective !== undefined) {
    report.accuracyObjective = settings.objective;
    report.shadowRate = settings.shadowRate;
  }
  if (estimate !== undefined) {
    if (Number.isFinite(estimate.edgeAgreement)) {
      report.estimatedEdgeAccuracy = round(Math.min(1, Math.max(0, estimate.edgeAgreement)));
    }
    report.estimatedJointLoss = round(Math.min(100, 100 * estimate.loss), 4);
    report.cut = round(cutHardness(estimate.cut));
    report.labelled = Math.round(estimate.labelled);
  }
  if (drift !== undefined) {
    report.driftScore = round(drift.score, 3);
    report.driftThreshold = settings.raiseAt;
    report.drifting = drift.drifting;
    report.driftWindow = Math.max(1, driftInputs);
    report.outlierShare = round(drift.share);
  }
  return report;
}

export { qualityReport };
export type { QualitySettings };
