/**
 * Line plots for benchmarks, as standalone SVG files: a vega-lite spec compiled to vega and
 * rendered headless (renderer 'none' needs no canvas or DOM), so a bench can leave a figure next
 * to its table without a browser or a native graphics library.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, View } from 'vega';
import { compile } from 'vega-lite';
import type { TopLevelSpec } from 'vega-lite';

type LayerSpec = Extract<TopLevelSpec, { layer: unknown }>;

interface PlotPoint {
  x: number;
  y: number;
}

interface PlotSeries {
  name: string;
  /** Drawn in the order given, so a curve that doubles back in x is not reshuffled. */
  points: ReadonlyArray<PlotPoint>;
}

/** A horizontal reference line across the whole plot, labelled with its name. */
interface PlotRule {
  name: string;
  y: number;
}

interface LinePlotOptions {
  title: string;
  xTitle: string;
  yTitle: string;
  series: ReadonlyArray<PlotSeries>;
  rules?: ReadonlyArray<PlotRule>;
  /** Axis ranges; by default vega picks a "nice" range around the data (not forced to 0). */
  xDomain?: readonly [number, number];
  yDomain?: readonly [number, number];
  width?: number;
  height?: number;
  /** A dot on every point (default). Off for dense sweeps, where the dots would hide the line. */
  markers?: boolean;
}

const dashes: number[][] = [
  [6, 4],
  [2, 3],
  [10, 3, 2, 3],
  [1, 0],
];

function scale(domain: readonly [number, number] | undefined) {
  return domain === undefined ? { zero: false } : { domain: [...domain], zero: false };
}

/** The vega-lite spec; exported so a caller can inspect or tweak it before rendering. */
function linePlotSpec(options: LinePlotOptions): TopLevelSpec {
  const lines = options.series.flatMap((s) =>
    s.points.map((p, order) => ({ name: s.name, x: p.x, y: p.y, order })),
  );
  const rules = (options.rules ?? []).map((r) => ({ name: r.name, y: r.y }));
  const color = {
    field: 'name',
    type: 'nominal',
    title: null,
    sort: options.series.map((s) => s.name),
  } as const;
  const x = {
    field: 'x',
    type: 'quantitative',
    title: options.xTitle,
    scale: scale(options.xDomain),
  } as const;
  const y = {
    field: 'y',
    type: 'quantitative',
    title: options.yTitle,
    scale: scale(options.yDomain),
  } as const;
  const layer: LayerSpec['layer'] = [
    {
      data: { values: lines },
      mark: {
        type: 'line',
        point: options.markers === false ? false : { size: 12 },
        strokeWidth: 1.5,
        // A zoomed-in domain cuts the curves at the frame instead of drawing past it.
        clip: true,
      },
      encoding: { x, y, color, order: { field: 'order', type: 'quantitative' } },
    },
  ];
  if (rules.length > 0) {
    // Grey and told apart by dash, in a legend of their own: in the curves' palette a reference
    // line would read as one more series.
    layer.push({
      data: { values: rules },
      mark: { type: 'rule', color: '#666', strokeWidth: 1.2, clip: true },
      encoding: {
        y,
        strokeDash: {
          field: 'name',
          type: 'nominal',
          title: null,
          sort: rules.map((r) => r.name),
          scale: { range: rules.map((_, i) => dashes[i % dashes.length]!) },
        },
      },
    });
  }
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v5.json',
    title: options.title,
    width: options.width ?? 640,
    height: options.height ?? 400,
    background: 'white',
    // Vega cuts legend labels at 160 px; series names are the point of the legend.
    config: { legend: { labelLimit: 400 } },
    layer,
  };
}

/** Renders the plot to SVG text. */
async function renderLinePlot(options: LinePlotOptions): Promise<string> {
  const view = new View(parse(compile(linePlotSpec(options)).spec), { renderer: 'none' });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}

/** Renders the plot and writes it to `file`, creating the directory if needed. */
async function writeLinePlot(file: URL | string, options: LinePlotOptions): Promise<void> {
  const path = typeof file === 'string' ? file : fileURLToPath(file);
  const svg = await renderLinePlot(options);
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, svg);
}

export { writeLinePlot };
export type { LinePlotOptions, PlotPoint, PlotRule, PlotSeries };
