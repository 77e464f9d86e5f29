/** The router function's graph-mode settings: the plan, and how its calls go out. */
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../../shared/errors/index.js';
import { loadGraphConfig } from '../../../shared/mlgraph/index.js';

const plan = JSON.stringify({
  graph: 'ns/g',
  root: 'm',
  nodes: [{ name: 'm', kind: 'model', url: 'http://m.example', model: { name: 'm' } }],
});

describe('loadGraphConfig', () => {
  it('pipelines the calls of a turn only with MLGRAPH_PIPELINE=true', () => {
    expect(loadGraphConfig({ MLGRAPH_GRAPH: plan }).pipeline).toBe(false);
    expect(loadGraphConfig({ MLGRAPH_GRAPH: plan, MLGRAPH_PIPELINE: 'true' }).pipeline).toBe(true);
    expect(() => loadGraphConfig({ MLGRAPH_GRAPH: plan, MLGRAPH_PIPELINE: 'no' })).toThrow(
      ConfigError,
    );
  });

  it('names what is wrong with the plan', () => {
    expect(() => loadGraphConfig({ MLGRAPH_GRAPH: '{' })).toThrow(/must be JSON/);
    expect(() =>
      loadGraphConfig({ MLGRAPH_GRAPH: JSON.stringify({ graph: 'ns/g', root: 'x', nodes: [] }) }),
    ).toThrow(/MLGRAPH_GRAPH: nodes/);
  });
});
