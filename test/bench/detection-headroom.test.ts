import { describe, expect, it } from 'vitest';
import { auc, canvasErrors } from '../../bench/detection/headroom.js';

const digit = { x1: 10, y1: 10, x2: 30, y2: 30, cls: 3 };
const other = { x1: 40, y1: 40, x2: 60, y2: 60, cls: 7 };
const box = (b: typeof digit, score: number, cls = b.cls) => ({ ...b, cls, score });

describe('bench/detection headroom: canvasErrors', () => {
  it('counts nothing when every digit has one box of its class', () => {
    expect(canvasErrors([box(digit, 0.9), box(other, 0.4)], [digit, other], 0.3)).toBe(0);
  });

  it('counts a box of the wrong class twice: the digit missed and the box stray', () => {
    expect(canvasErrors([box(digit, 0.9, 5)], [digit], 0.3)).toBe(2);
  });

  it('leaves out boxes under the working score, so their digit is missed', () => {
    expect(canvasErrors([box(digit, 0.2)], [digit], 0.3)).toBe(1);
    expect(canvasErrors([box(digit, 0.2)], [digit], 0.1)).toBe(0);
  });

  it('counts a box on an empty canvas as stray and a canvas without boxes as misses', () => {
    expect(canvasErrors([box(digit, 0.9)], [], 0.3)).toBe(1);
    expect(canvasErrors([], [digit, other], 0.3)).toBe(2);
  });

  it('counts a box that overlaps its digit below IoU 0.5 as both errors', () => {
    const shifted = { ...digit, x1: 20, x2: 40 }; // IoU 1/3
    expect(canvasErrors([box(shifted, 0.9)], [digit], 0.3)).toBe(2);
  });
});

describe('bench/detection headroom: auc', () => {
  it('is 1 for a perfect ranking, 0 for a reversed one, 0.5 for ties', () => {
    expect(auc([3, 2, 1, 0], [true, true, false, false])).toBe(1);
    expect(auc([0, 1, 2, 3], [true, true, false, false])).toBe(0);
    expect(auc([1, 1, 1, 1], [true, false, true, false])).toBe(0.5);
  });

  it('counts each positive-negative pair once, ties half', () => {
    // Pairs: (2 vs 1) win, (2 vs 2) tie, (0 vs 1) loss, (0 vs 2) loss.
    expect(auc([2, 0, 1, 2], [true, true, false, false])).toBe(1.5 / 4);
  });

  it('is undefined (NaN) without both kinds', () => {
    expect(auc([1, 2], [true, true])).toBeNaN();
  });
});
