/**
 * The only file that imports onnx-proto: a trained Network as an ONNX model (opset 13, float32)
 * and back. By default the graph takes `input` [N, 784] (flat 28x28 pixels in [0, 1]) and gives
 * `probabilities` [N, 10], so both MNIST models answer the same request shape; that default
 * output is what `npm run models` commits, byte for byte. Options rename the input and output
 * and swap the softmax for the raw outputs, for networks that are not image classifiers (the
 * ASET Q-network: `state` [N, d] to `q` [N, actions]). Reading a model back rebuilds the
 * trainer's Network from its initializers, which is how a test compares onnxruntime's outputs
 * with the trainer's. Detectors have their own export (`exportDetectorOnnx`): image in, the
 * decoded boxes, scores and class distributions of every grid cell out. Federated learning reads
 * and replaces a model's float32 initializers by name (`readInitializers`, `replaceInitializers`):
 * the graph stays as it was, so the averaged model is served like any other.
 */
import onnxProto from 'onnx-proto';
import { ValidationError } from '../errors/index.js';
import { Network } from './network.js';
import type { LayerSpec, Shape } from './network.js';
import type { DetectorHead } from './detector.js';

const { onnx } = onnxProto;
/** A model as protobufjs decodes it. */
type DecodedProto = ReturnType<typeof onnx.ModelProto.decode>;
const FLOAT = onnx.TensorProto.DataType.FLOAT;
const INT64 = onnx.TensorProto.DataType.INT64;
const opset = 13;

const imageShape = [1, 28, 28] as const;

function floatTensor(name: string, dims: number[], values: Float64Array) {
  const data = Float32Array.from(values);
  return onnx.TensorProto.create({
    name,
    dataType: FLOAT,
    dims,
    rawData: new Uint8Array(data.buffer, data.byteOffset, data.byteLength),
  });
}

function int64Tensor(name: string, values: number[]) {
  const data = BigInt64Array.from(values.map((v) => BigInt(v)));
  return onnx.TensorProto.create({
    name,
    dataType: INT64,
    dims: [values.length],
    rawData: new Uint8Array(data.buffer),
  });
}

const ints = (name: string, values: number[]) =>
  onnx.AttributeProto.create({ name, type: onnx.AttributeProto.AttributeType.INTS, ints: values });
const int = (name: string, value: number) =>
  onnx.AttributeProto.create({ name, type: onnx.AttributeProto.AttributeType.INT, i: value });

function valueInfo(name: string, width: number) {
  return onnx.ValueInfoProto.create({
    name,
    type: {
      tensorType: {
        elemType: FLOAT,
        shape: { dim: [{ dimParam: 'N' }, { dimValue: width }] },
      },
    },
  });
}

/** How the graph's ends look; every field defaults to the MNIST models' format. */
interface ExportOptions {
  /** Name of the graph input, [N, product of the network's input shape]; default `input`. */
  inputName?: string;
  /**
   * `softmax` (default): class probabilities, as the MNIST models serve. `identity`: the last
   * layer's raw outputs, for regression-like heads such as Q-values, where a softmax would
   * destroy the scale the caller compares.
   */
  head?: 'softmax' | 'identity';
  /** Name of the graph output; default `probabilities` (softmax) or `output` (identity). */
  outputName?: string;
}

const sameShape = (a: Shape, b: Shape) => a.length === b.length && a.every((v, i) => v === b[i]);

type NodeProto = ReturnType<typeof onnx.NodeProto.create>;
type TensorProto = ReturnType<typeof onnx.TensorProto.create>;
type AttributeProto = ReturnType<typeof onnx.AttributeProto.create>;

/**
 * The network's layers as ONNX nodes reading `input`: node `t{i}` is layer i's output. Shared by
 * the classifier and detector exports so a layer means the same ops in both.
 */
function layerGraph(
  network: Network,
  input: string,
): { nodes: NodeProto[]; initializers: TensorProto[]; output: string } {
  const nodes: NodeProto[] = [];
  const initializers: TensorProto[] = [];
  let current = input;
  let shape: Shape = network.inShape;
  network.layers.forEach((layer, index) => {
    const out = `t${index}`;
    const spec = layer.spec;
    const node = (opType: string, inputs: string[], attribute: ReturnType<typeof int>[] = []) =>
      nodes.push(
        onnx.NodeProto.create({
          opType,
          input: inputs,
          output: [out],
          name: `${opType.toLowerCase()}${index}`,
          attribute,
        }),
      );
    if (spec.type === 'avgpool2' || spec.type === 'maxpool2') {
      node(
        spec.type === 'avgpool2' ? 'AveragePool' : 'MaxPool',
        [current],
        [ints('kernel_shape', [2, 2]), ints('strides', [2, 2])],
      );
    } else if (spec.type === 'relu') {
      node('Relu', [current]);
    } else if (spec.type === 'flatten') {
      node('Flatten', [current], [int('axis', 1)]);
    } else if (spec.type === 'conv3x3') {
      const [weight, bias] = layer.params as [(typeof layer.params)[0], (typeof layer.params)[0]];
      initializers.push(
        floatTensor(weight.name, [spec.outChannels, shape[0]!, 3, 3], weight.value),
      );
      initializers.push(floatTensor(bias.name, [spec.outChannels], bias.value));
      node(
        'Conv',
        [current, weight.name, bias.name],
        [ints('kernel_shape', [3, 3]), ints('pads', [1, 1, 1, 1]), ints('strides', [1, 1])],
      );
    } else if (spec.type === 'conv1x1') {
      const [weight, bias] = layer.params as [(typeof layer.params)[0], (typeof layer.params)[0]];
      initializers.push(
        floatTensor(weight.name, [spec.outChannels, shape[0]!, 1, 1], weight.value),
      );
      initializers.push(floatTensor(bias.name, [spec.outChannels], bias.value));
      node('Conv', [current, weight.name, bias.name], [ints('kernel_shape', [1, 1])]);
    } else {
      const [weight, bias] = layer.params as [(typeof layer.params)[0], (typeof layer.params)[0]];
      const inputs = shape.reduce((a, b) => a * b, 1);
      initializers.push(floatTensor(weight.name, [inputs, spec.units], weight.value));
      initializers.push(floatTensor(bias.name, [spec.units], bias.value));
      node('Gemm', [current, weight.name, bias.name]);
    }
    current = out;
    shape = layer.outShape;
  });
  return { nodes, initializers, output: current };
}

/**
 * Serializes `network` as an ONNX model whose input is the flat [N, features] batch. A network
 * with an image input shape ([channels, height, width]) gets a Reshape first; a flat one ([d])
 * feeds its first layer directly. Only a non-default input shape or head adds metadata, so the
 * MNIST models' bytes are what they were before these options existed.
 */
function exportOnnx(
  network: Network,
  name: string,
  docString: string,
  options: ExportOptions = {},
): Uint8Array {
  const inputName = options.inputName ?? 'input';
  const head = options.head ?? 'softmax';
  const outputName = options.outputName ?? (head === 'softmax' ? 'probabilities' : 'output');
  const inShape = network.inShape;
  const width = inShape.reduce((a, b) => a * b, 1);
  const nodes: NodeProto[] = [];
  const initializers: TensorProto[] = [];
  let current = inputName;
  if (inShape.length > 1) {
    initializers.push(int64Tensor('image_shape', [-1, ...inShape]));
    current = 'image';
    nodes.push(
      onnx.NodeProto.create({
        opType: 'Reshape',
        input: [inputName, 'image_shape'],
        output: [current],
        name: 'reshape',
      }),
    );
  }
  const layers = layerGraph(network, current);
  nodes.push(...layers.nodes);
  initializers.push(...layers.initializers);
  current = layers.output;
  const shape = network.layers.at(-1)?.outShape ?? inShape;
  nodes.push(
    head === 'softmax'
      ? onnx.NodeProto.create({
          opType: 'Softmax',
          input: [current],
          output: [outputName],
          name: 'softmax',
          attribute: [int('axis', 1)],
        })
      : onnx.NodeProto.create({
          opType: 'Identity',
          input: [current],
          output: [outputName],
          name: 'identity',
        }),
  );
  const metadataProps = [{ key: 'layers', value: JSON.stringify(network.specs) }];
  if (!sameShape(inShape, imageShape)) {
    metadataProps.push({ key: 'input_shape', value: JSON.stringify(inShape) });
  }
  if (head !== 'softmax') metadataProps.push({ key: 'head', value: head });
  const model = onnx.ModelProto.create({
    irVersion: 8,
    opsetImport: [{ domain: '', version: opset }],
    producerName: 'edgeai',
    producerVersion: '0.1.0',
    docString,
    metadataProps,
    graph: onnx.GraphProto.create({
      name,
      node: nodes,
      initializer: initializers,
      input: [valueInfo(inputName, width)],
      output: [
        valueInfo(
          outputName,
          shape.reduce((a, b) => a * b, 1),
        ),
      ],
    }),
  });
  return onnx.ModelProto.encode(model).finish();
}

/**
 * Rebuilds the trainer's Network from a model written by exportOnnx, whatever its head: the
 * Network gives both (`forward` the softmax, `logits` the raw outputs). A model without an
 * `input_shape` entry is an MNIST one, [1, 28, 28].
 */
function importOnnx(bytes: Uint8Array): Network {
  const model = onnx.ModelProto.decode(bytes);
  const meta = (key: string) => model.metadataProps.find((p) => p.key === key)?.value ?? undefined;
  const layers = meta('layers');
  if (layers === undefined) throw new Error('not a model written by exportOnnx');
  const inputShape = meta('input_shape');
  const inShape = inputShape === undefined ? imageShape : (JSON.parse(inputShape) as number[]);
  const network = new Network(inShape, JSON.parse(layers) as LayerSpec[]);
  const tensors = new Map((model.graph?.initializer ?? []).map((t) => [t.name ?? '', t]));
  for (const param of network.params) {
    const raw = tensors.get(param.name)?.rawData;
    if (raw === undefined || raw === null) throw new Error(`missing initializer ${param.name}`);
    // Copied into a buffer of its own (float32 needs 4-byte alignment) with one memcpy.
    const copy = new Uint8Array(raw.length);
    copy.set(raw);
    param.value.set(new Float32Array(copy.buffer));
  }
  return network;
}

/**
 * The layers a model written by exportOnnx was built from (its `layers` metadata), so a trainer
 * rebuilds the architecture from the model alone; undefined for any other model.
 */
function onnxLayers(bytes: Uint8Array): LayerSpec[] | undefined {
  return layersOf(onnx.ModelProto.decode(bytes));
}

function layersOf(model: DecodedProto): LayerSpec[] | undefined {
  const layers = model.metadataProps.find((p) => p.key === 'layers')?.value;
  if (layers === undefined || layers === null || layers === '') return undefined;
  return JSON.parse(layers) as LayerSpec[];
}

/** The ends of a model written by exportOnnx: what a loader checks before trusting it. */
interface OnnxSignature {
  readonly inputName: string;
  readonly inputWidth: number;
  readonly outputName: string;
  readonly outputWidth: number;
  readonly head: 'softmax' | 'identity';
}

/**
 * Reads the input and output names and widths and the head of a model written by exportOnnx,
 * without building the Network: a caller that will run the model through onnxruntime (which
 * feeds the first input and reads the first output, whatever their names) can check it is the
 * kind of model it expects, a Q-network's `state` -> `q` rather than a classifier.
 */
function onnxSignature(bytes: Uint8Array): OnnxSignature {
  const model = onnx.ModelProto.decode(bytes);
  const end = (info: onnxProto.onnx.IValueInfoProto | undefined, what: string) => {
    // dimValue is a number, or a Long for values beyond 2^53; Number() reads either.
    const width = Number(info?.type?.tensorType?.shape?.dim?.[1]?.dimValue as unknown);
    if (info?.name === undefined || info.name === null || !(width > 0)) {
      throw new Error(`model ${what} is not [N, width]`);
    }
    return { name: info.name, width };
  };
  const input = end(model.graph?.input?.[0], 'input');
  const output = end(model.graph?.output?.[0], 'output');
  const head = model.metadataProps.find((p) => p.key === 'head')?.value;
  return {
    inputName: input.name,
    inputWidth: input.width,
    outputName: output.name,
    outputWidth: output.width,
    head: head === 'identity' ? 'identity' : 'softmax',
  };
}

/** A float32 tensor value info with the given dims ('N' for the batch). */
function tensorInfo(name: string, dims: ReadonlyArray<number | 'N'>) {
  return onnx.ValueInfoProto.create({
    name,
    type: {
      tensorType: {
        elemType: FLOAT,
        shape: {
          dim: dims.map((d) => (d === 'N' ? { dimParam: 'N' } : { dimValue: d })),
        },
      },
    },
  });
}

/**
 * The decoding of a detector's last layer ([N, 5 + classes, grid, grid]) into the three outputs,
 * with the same arithmetic as detector.ts's decodeGrid: per cell, centre = (cell - 0.5 +
 * 2 sigmoid(t)) x stride, half size = exp(t) x anchor / 2, class scores = softmax, score = sigmoid(objectness) x
 * the top class score.
 */
function decodeGraph(raw: string, head: DetectorHead) {
  const cells = head.grid * head.grid;
  const channels = 5 + head.classes;
  const nodes: NodeProto[] = [];
  const node = (
    opType: string,
    input: string[],
    output: string,
    attribute: AttributeProto[] = [],
  ) =>
    nodes.push(onnx.NodeProto.create({ opType, input, output: [output], name: output, attribute }));
  const positions = new Float64Array(cells * 2);
  for (let k = 0; k < cells; k += 1) {
    positions[2 * k] = (k % head.grid) - 0.5;
    positions[2 * k + 1] = Math.floor(k / head.grid) - 0.5;
  }
  const initializers = [
    int64Tensor('decode_shape', [-1, channels, cells]),
    int64Tensor('scores_shape', [-1, cells]),
    int64Tensor('slice_axis', [2]),
    ...[0, 1, 3, 5, channels].map((v) => int64Tensor(`channel_${v}`, [v])),
    floatTensor('cell_positions', [cells, 2], positions),
    floatTensor('two', [], Float64Array.of(2)),
    floatTensor('stride', [], Float64Array.of(head.stride)),
    floatTensor('half_anchor', [], Float64Array.of(head.anchor / 2)),
  ];
  const slice = (from: number, to: number, output: string) =>
    node('Slice', ['cells', `channel_${from}`, `channel_${to}`, 'slice_axis'], output);
  node('Reshape', [raw, 'decode_shape'], 'channels_by_cell');
  node('Transpose', ['channels_by_cell'], 'cells', [ints('perm', [0, 2, 1])]);
  slice(0, 1, 'objectness_logit');
  slice(1, 3, 'offset_logit');
  slice(3, 5, 'size_logit');
  slice(5, channels, 'class_logits');
  node('Sigmoid', ['objectness_logit'], 'objectness');
  node('Sigmoid', ['offset_logit'], 'offset_sigmoid');
  node('Mul', ['offset_sigmoid', 'two'], 'offset_doubled');
  node('Add', ['offset_doubled', 'cell_positions'], 'centre_in_cells');
  node('Mul', ['centre_in_cells', 'stride'], 'centre');
  node('Exp', ['size_logit'], 'size_ratio');
  node('Mul', ['size_ratio', 'half_anchor'], 'half_size');
  node('Sub', ['centre', 'half_size'], 'top_left');
  node('Add', ['centre', 'half_size'], 'bottom_right');
  node('Concat', ['top_left', 'bottom_right'], 'boxes', [int('axis', 2)]);
  node('Softmax', ['class_logits'], 'class_scores', [int('axis', 2)]);
  node('ReduceMax', ['class_scores'], 'top_class_score', [ints('axes', [2]), int('keepdims', 1)]);
  node('Mul', ['objectness', 'top_class_score'], 'cell_scores');
  node('Reshape', ['cell_scores', 'scores_shape'], 'scores');
  return { nodes, initializers };
}

/**
 * Serializes a grid detector: input `image` [N, 1, 64, 64] (pixels in [0, 1]); outputs `boxes`
 * [N, cells, 4] (x1, y1, x2, y2 in input pixels), `scores` [N, cells] and `class_scores`
 * [N, cells, classes], one row per grid cell in row-major order. No NMS in the graph: the caller
 * chooses its score floor and IoU, and the miners see every box the model considered. The layers
 * and head go into the metadata so importDetectorOnnx can rebuild the trainer's network.
 */
function exportDetectorOnnx(
  network: Network,
  head: DetectorHead,
  name: string,
  docString: string,
): Uint8Array {
  const cells = head.grid * head.grid;
  const layers = layerGraph(network, 'image');
  const decode = decodeGraph(layers.output, head);
  const model = onnx.ModelProto.create({
    irVersion: 8,
    opsetImport: [{ domain: '', version: opset }],
    producerName: 'edgeai',
    producerVersion: '0.1.0',
    docString,
    metadataProps: [
      { key: 'layers', value: JSON.stringify(network.specs) },
      { key: 'input_shape', value: JSON.stringify(network.inShape) },
      { key: 'detector_head', value: JSON.stringify(head) },
    ],
    graph: onnx.GraphProto.create({
      name,
      node: [...layers.nodes, ...decode.nodes],
      initializer: [...layers.initializers, ...decode.initializers],
      input: [tensorInfo('image', ['N', ...network.inShape])],
      output: [
        tensorInfo('boxes', ['N', cells, 4]),
        tensorInfo('scores', ['N', cells]),
        tensorInfo('class_scores', ['N', cells, head.classes]),
      ],
    }),
  });
  return onnx.ModelProto.encode(model).finish();
}

/** Rebuilds a detector written by exportDetectorOnnx: its network and its decoding constants. */
function importDetectorOnnx(bytes: Uint8Array): { network: Network; head: DetectorHead } {
  const model = onnx.ModelProto.decode(bytes);
  const head = model.metadataProps.find((p) => p.key === 'detector_head')?.value;
  if (head === undefined || head === null) throw new Error('not a detector written by edgeai');
  return { network: importOnnx(bytes), head: JSON.parse(head) as DetectorHead };
}

/**
 * A float32 initializer: dims and row-major values. The same shape as shared/fl's Tensor, which
 * this layer cannot import; TypeScript's structural typing lets either stand for the other.
 */
interface FloatInitializer {
  readonly dims: readonly number[];
  readonly values: Float32Array;
}

/** An initializer as a decoded model holds it. */
type StoredTensor = onnxProto.onnx.ITensorProto;

/** Throws unless an initializer's data lives in the model (not in an external file). */
function checkEmbedded(tensor: StoredTensor, name: string): void {
  if (tensor.dataLocation === onnx.TensorProto.DataLocation.EXTERNAL) {
    throw new ValidationError(`initializer ${name} is stored outside the model, which is not read`);
  }
}

/**
 * Where an initializer's values are copied: `bytes` (a multiple of 4) of memory, 4-byte aligned.
 * By default a new buffer each (transferable to a thread); a trainer passes memory it reuses
 * round after round (new memory costs a page fault per 4 KiB on first touch).
 */
type ValuesMemory = (bytes: number) => Uint8Array;

const newMemory: ValuesMemory = (bytes) => new Uint8Array(bytes);

/** A float32 initializer's values from rawData (little-endian) or floatData, checked against dims. */
function floatValues(
  tensor: StoredTensor,
  name: string,
  count: number,
  memory: ValuesMemory,
): Float32Array {
  const raw = tensor.rawData;
  if (raw !== undefined && raw !== null && raw.length > 0) {
    if (raw.length !== 4 * count) {
      throw new ValidationError(
        `initializer ${name}: ${raw.length} raw bytes for ${count} float32 values`,
      );
    }
    // Copied into aligned memory of its own: a typed array's set is a memcpy, where
    // Uint8Array.from walks the bytes one by one (15x slower at 0.8 MB).
    const own = memory(raw.length);
    own.set(raw);
    return new Float32Array(own.buffer, own.byteOffset, count);
  }
  const floats = tensor.floatData ?? [];
  if (floats.length !== count) {
    throw new ValidationError(
      `initializer ${name}: ${floats.length} float values, dims say ${count}`,
    );
  }
  const own = memory(4 * count);
  const values = new Float32Array(own.buffer, own.byteOffset, count);
  values.set(floats);
  return values;
}

/** The model's initializers by name, refusing an unnamed or repeated one. */
function initializersByName(model: DecodedProto) {
  const byName = new Map<string, StoredTensor>();
  for (const tensor of model.graph?.initializer ?? []) {
    const name = tensor.name ?? '';
    if (name === '') throw new ValidationError('the model has an unnamed initializer');
    if (byName.has(name)) throw new ValidationError(`the model has two initializers named ${name}`);
    byName.set(name, tensor);
  }
  return byName;
}

const dimsOf = (tensor: StoredTensor) => (tensor.dims ?? []).map((d) => Number(d));

/**
 * Every float32 initializer of an ONNX model by name, in the graph's order (copies, so the
 * caller may change them): what federated learning averages. Other types (the int64 shape of a
 * Reshape) are left out; they are part of the graph, not of what is learnt.
 */
function readInitializers(bytes: Uint8Array): Map<string, FloatInitializer> {
  return initializersOf(onnx.ModelProto.decode(bytes), newMemory);
}

/**
 * A model written by exportOnnx as a trainer needs it, from one decode: the layers it was built
 * from (undefined for another model) and its float32 initializers (readInitializers).
 */
function readTrainable(
  bytes: Uint8Array,
  memory: ValuesMemory = newMemory,
): { layers: LayerSpec[] | undefined; weights: Map<string, FloatInitializer> } {
  const model = onnx.ModelProto.decode(bytes);
  return { layers: layersOf(model), weights: initializersOf(model, memory) };
}

function initializersOf(model: DecodedProto, memory: ValuesMemory) {
  const out = new Map<string, FloatInitializer>();
  for (const [name, tensor] of initializersByName(model)) {
    if (tensor.dataType !== FLOAT) continue;
    checkEmbedded(tensor, name);
    const dims = dimsOf(tensor);
    out.set(name, {
      dims,
      values: floatValues(
        tensor,
        name,
        dims.reduce((a, b) => a * b, 1),
        memory,
      ),
    });
  }
  return out;
}

/**
 * The same model with the named float32 initializers' values replaced (written as rawData):
 * every name in `weights` must be a float32 initializer of the model with the same dims. The
 * graph, the metadata and every other initializer are kept, so the result runs wherever the
 * original did.
 */
function replaceInitializers(
  bytes: Uint8Array,
  weights: ReadonlyMap<string, FloatInitializer>,
): Uint8Array {
  const model = onnx.ModelProto.decode(bytes);
  const byName = initializersByName(model);
  for (const [name, { dims, values }] of weights) {
    const tensor = byName.get(name);
    if (tensor === undefined) throw new ValidationError(`the model has no initializer ${name}`);
    if (tensor.dataType !== FLOAT) {
      throw new ValidationError(
        `initializer ${name} is not float32 (data type ${tensor.dataType})`,
      );
    }
    checkEmbedded(tensor, name);
    const expected = dimsOf(tensor);
    const count = expected.reduce((a, b) => a * b, 1);
    if (!sameShape(dims, expected) || values.length !== count) {
      throw new ValidationError(
        `initializer ${name}: dims ${JSON.stringify(dims)} (${values.length} values), the model has ${JSON.stringify(expected)}`,
      );
    }
    tensor.rawData = new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
    tensor.floatData = [];
  }
  return onnx.ModelProto.encode(model).finish();
}

export {
  onnxLayers,
  exportOnnx,
  importOnnx,
  onnxSignature,
  exportDetectorOnnx,
  importDetectorOnnx,
  readInitializers,
  readTrainable,
  replaceInitializers,
};
export type { ExportOptions, OnnxSignature, FloatInitializer };
