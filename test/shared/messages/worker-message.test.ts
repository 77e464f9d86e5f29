/** The report's schema, as both the edge worker and upstream-status use it. */
import { describe, expect, it } from 'vitest';
import { workerQuality } from '../../../shared/crds/index.js';
import { workerMessage } from '../../../shared/messages/worker-message.js';
import { qualityReport } from '../../support/worker-quality.js';

const base = { phase: 'Inference', status: 'Running' };
const withTaskInfo = (taskInfo: Record<string, number>) => ({ ...base, output: { taskInfo } });
const withQuality = (quality: Record<string, unknown>) => ({
  ...base,
  output: { taskInfo: { uploaded: 1, inferenceNumber: 10 }, quality },
});
/** The issues of a refused message, as `path: message`. */
const issues = (body: unknown): string[] => {
  const parsed = workerMessage.safeParse(body);
  expect(parsed.success).toBe(false);
  return parsed.success
    ? []
    : parsed.error.issues.map((issue) => `${issue.path.map(String).join('.')}: ${issue.message}`);
};

const full = qualityReport;

describe('WorkerMessage', () => {
  it('takes shadowNumber with the inferenceNumber it is bounded by', () => {
    const parsed = workerMessage.parse(
      withTaskInfo({ uploaded: 3, inferenceNumber: 100, hardExampleNumber: 3, shadowNumber: 5 }),
    );
    expect(parsed.output?.taskInfo?.shadowNumber).toBe(5);
    expect(
      workerMessage.safeParse(withTaskInfo({ uploaded: 0, inferenceNumber: 5, shadowNumber: 5 }))
        .success,
    ).toBe(true);
  });

  it.each<[string, Record<string, number>, string]>([
    [
      'more shadowed than inferred',
      { uploaded: 0, inferenceNumber: 4, shadowNumber: 5 },
      'output.taskInfo.shadowNumber: shadowNumber cannot exceed inferenceNumber',
    ],
    [
      'shadowNumber without inferenceNumber',
      { uploaded: 0, shadowNumber: 1 },
      'output.taskInfo.inferenceNumber: required when shadowNumber is given',
    ],
    [
      'a negative shadowNumber',
      { uploaded: 0, inferenceNumber: 4, shadowNumber: -1 },
      'output.taskInfo.shadowNumber: Too small: expected number to be >=0',
    ],
    [
      'a fractional shadowNumber',
      { uploaded: 0, inferenceNumber: 4, shadowNumber: 1.5 },
      'output.taskInfo.shadowNumber: Invalid input: expected int, received number',
    ],
  ])('refuses %s', (_case, taskInfo, issue) => {
    expect(issues(withTaskInfo(taskInfo))).toContain(issue);
  });

  it('takes a full quality report, and one with no field at all', () => {
    expect(workerMessage.parse(withQuality(full)).output?.quality).toEqual(full);
    expect(workerMessage.parse(withQuality({})).output?.quality).toEqual({});
    // At the bounds.
    const edges = {
      accuracyObjective: 100,
      estimatedEdgeAccuracy: 0,
      estimatedJointLoss: 0,
      cut: 1,
      shadowRate: 1,
      labelled: 0,
      driftScore: 0,
      driftThreshold: 0,
      drifting: false,
      driftWindow: 1,
      outlierShare: 1,
    };
    expect(workerQuality.parse(edges)).toEqual(edges);
  });

  it.each<[string, Record<string, unknown>, string]>([
    [
      'an objective over 100 points',
      { accuracyObjective: 100.5 },
      'output.quality.accuracyObjective: Too big',
    ],
    [
      'a negative objective',
      { accuracyObjective: -1 },
      'output.quality.accuracyObjective: Too small',
    ],
    [
      'an agreement over 1',
      { estimatedEdgeAccuracy: 1.01 },
      'output.quality.estimatedEdgeAccuracy: Too big',
    ],
    [
      'a loss over 100 points',
      { estimatedJointLoss: 101 },
      'output.quality.estimatedJointLoss: Too big',
    ],
    [
      'a negative loss',
      { estimatedJointLoss: -0.1 },
      'output.quality.estimatedJointLoss: Too small',
    ],
    ['a cut over 1', { cut: 2 }, 'output.quality.cut: Too big'],
    ['a negative shadow rate', { shadowRate: -0.05 }, 'output.quality.shadowRate: Too small'],
    ['a fractional labelled count', { labelled: 2.5 }, 'output.quality.labelled: Invalid input'],
    ['a negative labelled count', { labelled: -1 }, 'output.quality.labelled: Too small'],
    [
      'a negative drift score',
      { driftScore: -1, drifting: false },
      'output.quality.driftScore: Too small',
    ],
    ['a negative threshold', { driftThreshold: -1 }, 'output.quality.driftThreshold: Too small'],
    ['an empty drift window', { driftWindow: 0 }, 'output.quality.driftWindow: Too small'],
    [
      'a fractional drift window',
      { driftWindow: 10.5 },
      'output.quality.driftWindow: Invalid input',
    ],
    ['an outlier share over 1', { outlierShare: 1.2 }, 'output.quality.outlierShare: Too big'],
    ['drifting as a string', { drifting: 'true' }, 'output.quality.drifting: Invalid input'],
    [
      'a drift score without the verdict',
      { driftScore: 7.2, driftThreshold: 3.1 },
      'output.quality.drifting: required when driftScore is given',
    ],
    ['an unknown field', { accuracy: 0.9 }, 'output.quality: Unrecognized key: "accuracy"'],
  ])('refuses %s', (_case, quality, issue) => {
    const found = issues(withQuality(quality));
    expect(
      found.some((text) => text.startsWith(issue)),
      found.join('\n'),
    ).toBe(true);
  });

  it('refuses a drift score that is not finite (as the edge would compute from an empty window)', () => {
    expect(workerQuality.safeParse({ driftScore: Infinity, drifting: true }).success).toBe(false);
    expect(workerQuality.safeParse({ driftScore: Number.NaN, drifting: true }).success).toBe(false);
    expect(workerQuality.safeParse({ driftThreshold: Infinity }).success).toBe(false);
  });
});
