/** Dataset files (CSV, label and 784 pixels 0-255): round trips and precise refusals. */
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../../shared/errors/index.js';
import { parseDatasetCsv, writeDatasetCsv } from '../../../shared/fl/dataset-file.js';
import type { ParseLimits } from '../../../shared/fl/dataset-file.js';
import { loadMnist, pixels } from '../../../shared/training/data.js';

const test = loadMnist().test;
const limits = { maxSamples: 10_000 };

/** A valid line: label then 784 pixels, with `edit` applied to the fields. */
function line(edit: (fields: string[]) => void = () => {}): string {
  const fields = ['7', ...Array.from({ length: pixels }, (_, i) => String(i % 256))];
  edit(fields);
  return fields.join(',');
}

const refused = (text: string, message: RegExp, custom: ParseLimits = limits) => {
  expect(() => parseDatasetCsv(text, custom)).toThrow(ValidationError);
  expect(() => parseDatasetCsv(text, custom)).toThrow(message);
};

describe('dataset files', () => {
  it('round-trips a split: labels exact, pixels within 1/510, text stable', () => {
    const indices = [0, 5, 17, 1488];
    const text = writeDatasetCsv(test, indices);
    const lines = text.split('\n');
    expect(lines[0]).toBe(['label', ...Array.from({ length: 784 }, (_, i) => `p${i}`)].join(','));
    expect(lines.length).toBe(indices.length + 2);
    const split = parseDatasetCsv(text, limits);
    expect(split.n).toBe(4);
    indices.forEach((i, k) => {
      expect(split.y[k]).toBe(test.y[i]);
      for (let p = 0; p < pixels; p += 1) {
        const d = Math.abs(split.x[k * pixels + p]! - test.x[i * pixels + p]!);
        expect(d).toBeLessThanOrEqual(1 / 510 + 1e-7);
      }
    });
    expect(writeDatasetCsv(split)).toBe(text);
  });

  it('reads files without a header, with CRLF, and without a final newline', () => {
    const text = `${line()}\r\n${line((f) => (f[0] = '0'))}`;
    const split = parseDatasetCsv(text, limits);
    expect([...split.y]).toEqual([7, 0]);
    expect(split.x[1]).toBeCloseTo(1 / 255, 7);
    expect(split.x[255]).toBe(1);
  });

  it('reads back the whole test split it wrote (its speed is for a bench, not a test)', () => {
    const split = parseDatasetCsv(writeDatasetCsv(test), limits);
    expect(split.n).toBe(test.n);
    expect([...split.y]).toEqual([...test.y]);
    // Pixels travel as 0-255 integers: within half a step of what was written.
    let worst = 0;
    for (let i = 0; i < test.x.length; i += 1)
      worst = Math.max(worst, Math.abs(split.x[i]! - test.x[i]!));
    expect(worst).toBeLessThanOrEqual(0.5 / 255 + 1e-6);
  });

  it('names the line, column and value of a bad field', () => {
    const header = writeDatasetCsv(test, []).trimEnd();
    refused(
      `${header}\n${line()}\n${line((f) => (f[3] = '256'))}\n`,
      /line 3, column 4 \(p2\): "256" is not a pixel 0-255/,
    );
    refused(
      `${line((f) => (f[0] = '10'))}\n`,
      /line 1, column 1 \(label\): "10" is not a label 0-9/,
    );
    refused(`${line((f) => (f[784] = '-1'))}\n`, /line 1, column 785 \(p783\): "-1"/);
    refused(`${line((f) => (f[9] = '1.5'))}\n`, /column 10 \(p8\): "1.5"/);
    refused(`${line((f) => (f[9] = ''))}\n`, /column 10 \(p8\): ""/);
    refused(`${line((f) => (f[9] = ' 4'))}\n`, /column 10 \(p8\): " 4"/);
    refused(`${line((f) => (f[9] = '0012'))}\n`, /column 10 \(p8\): "0012"/);
  });

  it('refuses lines of the wrong width, empty lines, a bad header and too many samples', () => {
    refused(`${line((f) => f.pop())}\n`, /line 1 has 784 columns, expected 785/);
    refused(`${line()}\n${line((f) => f.push('0'))}\n`, /line 2 has 786 columns, expected 785/);
    refused(`${line()}\n\n${line()}\n`, /line 2 is empty/);
    refused('label,p0,p1\n', /line 1 \(the header\) has 3 columns, expected 785/);
    refused('', /no samples/);
    refused(`${writeDatasetCsv(test, []).trimEnd()}\n`, /no samples/);
    refused(writeDatasetCsv(test, [1, 2, 3]), /3 samples, over the limit of 2/, { maxSamples: 2 });
  });

  it('reads other widths and class counts when told', () => {
    const split = parseDatasetCsv('label,a,b\n2,0,255\n0,128,1\n', {
      maxSamples: 5,
      pixels: 2,
      classes: 3,
    });
    expect([...split.y]).toEqual([2, 0]);
    expect(split.x.length).toBe(4);
    refused('3,0,0\n', /"3" is not a label 0-2/, { maxSamples: 5, pixels: 2, classes: 3 });
  });

  it('refuses to write an index outside the split', () => {
    expect(() => writeDatasetCsv(test, [test.n])).toThrow(/sample index 1489 is not in 0 to 1488/);
  });
});
