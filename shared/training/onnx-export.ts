/**
 * The only file that imports onnx-proto: a trained Network as an ONNX model (opset 13, float32)
 * and back. The graph takes `input` [N, 784] (flat 28x28 pixels in [0, 1]) and gives
 * `probabilities` [N, 10], so both models answer the same request shape. Reading a model back
 * rebuilds the trainer's Network from its initializers, which is how a test compares
 * onnxruntime's outputs with the trainer's.
 */
import onnxProto from 'onnx-proto';
import { Network } from './network.js';
import type { LayerSpec, Shape } from './network.js';

const { onnx } = onnxProto;
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

/** Serializes `network` (input [1, 28, 28]) as an ONNX model. */
function exportOnnx(network: Network, name: string, docString: string): Uint8Array {
  const nodes = [];
  const initializers = [int64Tensor('image_shape', [-1, ...imageShape])];
  let current = 'image';
  nodes.push(
    onnx.NodeProto.create({
      opType: 'Reshape',
      input: ['input', 'image_shape'],
      output: [current],
      name: 'reshape',
    }),
  );
  let shape: Shape = imageShape;
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
  nodes.push(
    onnx.NodeProto.create({
      opType: 'Softmax',
      input: [current],
      output: ['probabilities'],
      name: 'softmax',
      attribute: [int('axis', 1)],
    }),
  );
  const model = onnx.ModelProto.create({
    irVersion: 8,
    opsetImport: [{ domain: '', version: opset }],
    producerName: 'edgeai',
    producerVersion: '0.1.0',
    docString,
    metadataProps: [{ key: 'layers', value: JSON.stringify(network.specs) }],
    graph: onnx.GraphProto.create({
      name,
      node: nodes,
      initializer: initializers,
      input: [valueInfo('input', 28 * 28)],
      output: [
        valueInfo(
          'probabilities',
          shape.reduce((a, b) => a * b, 1),
        ),
      ],
    }),
  });
  return onnx.ModelProto.encode(model).finish();
}

/** Rebuilds the trainer's Network from a model written by exportOnnx. */
function importOnnx(bytes: Uint8Array): Network {
  const model = onnx.ModelProto.decode(bytes);
  const layers = model.metadataProps.find((p) => p.key === 'layers')?.value;
  if (layers === undefined || layers === null) throw new Error('not a model written by exportOnnx');
  const network = new Network(imageShape, JSON.parse(layers) as LayerSpec[]);
  const tensors = new Map((model.graph?.initializer ?? []).map((t) => [t.name ?? '', t]));
  for (const param of network.params) {
    const raw = tensors.get(param.name)?.rawData;
    if (raw === undefined || raw === null) throw new Error(`missing initializer ${param.name}`);
    const copy = Uint8Array.from(raw);
    param.value.set(new Float32Array(copy.buffer));
  }
  return network;
}

export { exportOnnx, importOnnx };
