/** A complete quality report, as the edge sends it in a WorkerMessage's `output.quality`. */
import type { WorkerQuality } from '../../shared/crds/index.js';

export const qualityReport: WorkerQuality = {
  accuracyObjective: 2,
  estimatedEdgeAccuracy: 0.934,
  estimatedJointLoss: 1.25,
  cut: 0.35,
  shadowRate: 0.05,
  labelled: 512,
  driftScore: 7.2,
  driftThreshold: 3.1,
  drifting: true,
  driftWindow: 1000,
  outlierShare: 0.31,
};
