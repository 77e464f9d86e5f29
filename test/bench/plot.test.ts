/**
 * bench/support/plot: the SVG a benchmark leaves behind must open in a browser and name its
 * curves; rendering is headless (vega's 'none' renderer), so this runs wherever the tests run.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { writeLinePlot } from '../../bench/support/plot.js';

/**
 * Checks that every element opened is closed, in order. No XML parser is a dependency of the
 * project, and vega writes plain SVG (no CDATA, comments or doctype), so tags suffice.
 */
function unbalancedTags(svg: string): string[] {
  const stack: string[] = [];
  const problems: string[] = [];
  for (const match of svg.matchAll(/<(\/?)([A-Za-z][\w:.-]*)[^>]*?(\/?)>/g)) {
    const [, closing, name = '', selfClosing] = match;
    if (selfClosing === '/') continue;
    if (closing !== '/') stack.push(name);
    else if (stack.pop() !== name) problems.push(`</${name}> does not close the open element`);
  }
  return [...problems, ...stack.map((name) => `<${name}> never closed`)];
}

describe('writeLinePlot', () => {
  const dir = mkdtempSync(join(tmpdir(), 'edgeai-plot-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const options = {
    title: 'accuracy vs offload',
    xTitle: 'offload (%)',
    yTitle: 'accuracy (%)',
    series: [
      {
        name: 'Threshold miner',
        points: [
          { x: 0, y: 94 },
          { x: 10, y: 97 },
          { x: 100, y: 98 },
        ],
      },
      {
        name: 'Random miner',
        points: [
          { x: 0, y: 94 },
          { x: 100, y: 98 },
        ],
      },
    ],
    rules: [{ name: 'cloud only', y: 98 }],
  };

  it('writes a well-formed SVG naming every series and rule, creating the directory', async () => {
    const file = join(dir, 'nested', 'plot.svg');
    await writeLinePlot(file, options);
    const svg = readFileSync(file, 'utf8');
    expect(svg.startsWith('<svg')).toBe(true);
    expect(svg.trimEnd().endsWith('</svg>')).toBe(true);
    expect(svg).toContain('xmlns="http://www.w3.org/2000/svg"');
    expect(unbalancedTags(svg)).toEqual([]);
    for (const name of ['Threshold miner', 'Random miner', 'cloud only', 'accuracy vs offload']) {
      expect(svg).toContain(name);
    }
    // Vega draws each series of a line mark in its own group: a series lost on the way would
    // otherwise still be named by the legend.
    expect(svg.match(/class="mark-line role-mark /g)?.length).toBe(options.series.length);
  });

  it('accepts a file URL', async () => {
    const file = pathToFileURL(join(dir, 'url.svg'));
    await writeLinePlot(file, { ...options, rules: [] });
    const svg = readFileSync(file, 'utf8');
    expect(svg).toContain('Random miner');
    expect(svg).not.toContain('cloud only');
  });
});
