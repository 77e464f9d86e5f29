/**
 * Small, real ONNX models built in memory with onnx-proto, for testing a generic inference server
 * over every Open Inference Protocol datatype, tensor rank and signature shape without committing
 * binary fixtures: each builder returns the serialized ModelProto, ready for
 * `InferenceSession.create(bytes)`. The graphs use opset 13 and IR version 8, as
 * shared/training/onnx-export.ts does, so they load in the same onnxruntime-node the server uses.
 * test/fixtures/ort-datatypes.md records what onnxruntime-node 1.30's CPU provider does with them.
 */
import onnxProto from 'onnx-proto';

const { onnx } = onnxProto;
const DataType = onnx.TensorProto.DataType;
const opset = 13;

/**
 * A tensor datatype as the Open Inference Protocol (KServe v2) names it. `BYTES` is ONNX `STRING`
 * (onnxruntime-node: `string`, a `string[]`); `FP16` is ONNX `FLOAT16`.
 */
type OipDatatype =
  | 'BOOL'
  | 'UINT8'
  | 'UINT16'
  | 'UINT32'
  | 'UINT64'
  | 'INT8'
  | 'INT16'
  | 'INT32'
  | 'INT64'
  | 'FP16'
  | 'FP32'
  | 'FP64'
  | 'BYTES';

/**
 * The onnxruntime-node `Tensor` type strings the OIP datatypes map to: the subset of
 * `Tensor.Type` a server speaking OIP can meet (no int4/uint4, which OIP has no name for).
 */
type OrtTensorType =
  | 'bool'
  | 'uint8'
  | 'uint16'
  | 'uint32'
  | 'uint64'
  | 'int8'
  | 'int16'
  | 'int32'
  | 'int64'
  | 'float16'
  | 'float32'
  | 'float64'
  | 'string';

/** One row per OIP datatype: its ONNX element type and its onnxruntime-node type string. */
const datatypes: Record<
  OipDatatype,
  { onnx: onnxProto.onnx.TensorProto.DataType; ort: OrtTensorType }
> = {
  BOOL: { onnx: DataType.BOOL, ort: 'bool' },
  UINT8: { onnx: DataType.UINT8, ort: 'uint8' },
  UINT16: { onnx: DataType.UINT16, ort: 'uint16' },
  UINT32: { onnx: DataType.UINT32, ort: 'uint32' },
  UINT64: { onnx: DataType.UINT64, ort: 'uint64' },
  INT8: { onnx: DataType.INT8, ort: 'int8' },
  INT16: { onnx: DataType.INT16, ort: 'int16' },
  INT32: { onnx: DataType.INT32, ort: 'int32' },
  INT64: { onnx: DataType.INT64, ort: 'int64' },
  FP16: { onnx: DataType.FLOAT16, ort: 'float16' },
  FP32: { onnx: DataType.FLOAT, ort: 'float32' },
  FP64: { onnx: DataType.DOUBLE, ort: 'float64' },
  BYTES: { onnx: DataType.STRING, ort: 'string' },
};

/** Every OIP datatype, in the order the type lists them: what a test iterates to cover them all. */
const oipDatatypes: readonly OipDatatype[] = Object.keys(datatypes) as OipDatatype[];

/**
 * The onnxruntime-node `Tensor` type string for an OIP datatype: what a test passes to
 * `new Tensor(type, data, dims)` and compares with `session.inputMetadata[i].type` and an output
 * tensor's `type`.
 */
function ortTypeOf(datatype: OipDatatype): OrtTensorType {
  return datatypes[datatype].ort;
}

/** The ONNX `TensorProto.DataType` of an OIP datatype, for tests that read a model back. */
function onnxElemTypeOf(datatype: OipDatatype): onnxProto.onnx.TensorProto.DataType {
  return datatypes[datatype].onnx;
}

/**
 * A graph input or output. A number is a fixed dim, a string a symbolic one (`dimParam`), which
 * onnxruntime-node reports back as that string in the session's metadata. `[]` is a scalar:
 * the shape message is still written (empty), which ONNX reads as rank 0, not unknown rank.
 */
function valueInfo(name: string, datatype: OipDatatype, shape: ReadonlyArray<number | string>) {
  return onnx.ValueInfoProto.create({
    name,
    type: {
      tensorType: {
        elemType: datatypes[datatype].onnx,
        shape: {
          dim: shape.map((d) => (typeof d === 'number' ? { dimValue: d } : { dimParam: d })),
        },
      },
    },
  });
}

function int64Tensor(name: string, dims: number[], values: number[]) {
  const data = BigInt64Array.from(values.map((v) => BigInt(v)));
  return onnx.TensorProto.create({
    name,
    dataType: DataType.INT64,
    dims,
    rawData: new Uint8Array(data.buffer),
  });
}

function floatTensor(name: string, dims: number[], values: number[]) {
  const data = Float32Array.from(values);
  return onnx.TensorProto.create({
    name,
    dataType: DataType.FLOAT,
    dims,
    rawData: new Uint8Array(data.buffer),
  });
}

const int = (name: string, value: number) =>
  onnx.AttributeProto.create({ name, type: onnx.AttributeProto.AttributeType.INT, i: value });
const ints = (name: string, values: number[]) =>
  onnx.AttributeProto.create({ name, type: onnx.AttributeProto.AttributeType.INTS, ints: values });

function node(
  opType: string,
  input: string[],
  output: string[],
  attribute: ReturnType<typeof int>[] = [],
) {
  return onnx.NodeProto.create({
    opType,
    input,
    output,
    name: `${opType.toLowerCase()}_${output[0] ?? ''}`,
    attribute,
  });
}

/** The parts of a graph a builder chooses; the rest (opset, IR version, producer) is fixed. */
interface GraphParts {
  name: string;
  nodes: ReturnType<typeof node>[];
  initializers?: ReturnType<typeof int64Tensor>[];
  inputs: ReturnType<typeof valueInfo>[];
  outputs: ReturnType<typeof valueInfo>[];
}

function encodeModel(parts: GraphParts): Uint8Array {
  const model = onnx.ModelProto.create({
    irVersion: 8,
    opsetImport: [{ domain: '', version: opset }],
    producerName: 'edgeai-tests',
    producerVersion: '0.1.0',
    graph: onnx.GraphProto.create({
      name: parts.name,
      node: parts.nodes,
      initializer: parts.initializers ?? [],
      input: parts.inputs,
      output: parts.outputs,
    }),
  });
  return onnx.ModelProto.encode(model).finish();
}

/** What `identityModel` builds: one input and one output of the same datatype and shape. */
interface IdentityModelOptions {
  datatype: OipDatatype;
  /** Dims of both ends: numbers are fixed, strings symbolic (`'N'`, `'H'`); `[]` is a scalar. */
  shape: Array<number | string>;
  /** Default `input`. */
  inputName?: string;
  /** Default `output`. */
  outputName?: string;
}

/**
 * One ONNX `Identity` node: output = input, same datatype and declared shape. The smallest model
 * that exercises a server's tensor encoding and decoding for one datatype and rank, since every
 * value sent must come back unchanged.
 */
function identityModel(options: IdentityModelOptions): Uint8Array {
  const inputName = options.inputName ?? 'input';
  const outputName = options.outputName ?? 'output';
  return encodeModel({
    name: `identity_${options.datatype.toLowerCase()}_rank${options.shape.length}`,
    nodes: [node('Identity', [inputName], [outputName])],
    inputs: [valueInfo(inputName, options.datatype, options.shape)],
    outputs: [valueInfo(outputName, options.datatype, options.shape)],
  });
}

/** One input and the output that repeats it, in `identitiesModel`. */
interface IdentityPair {
  input: string;
  output: string;
  datatype: OipDatatype;
  /** Dims of both ends, as in `IdentityModelOptions.shape`. */
  shape: Array<number | string>;
}

/**
 * Several `Identity` nodes side by side, one per pair: each output repeats its input, and the
 * model needs every input. Inputs and outputs are listed in the pairs' order. For a server
 * whose one request carries tensors of several datatypes at once (the mixed-datatype requests
 * OIP clients send).
 */
function identitiesModel(name: string, pairs: readonly IdentityPair[]): Uint8Array {
  return encodeModel({
    name,
    nodes: pairs.map((p) => node('Identity', [p.input], [p.output])),
    inputs: pairs.map((p) => valueInfo(p.input, p.datatype, p.shape)),
    outputs: pairs.map((p) => valueInfo(p.output, p.datatype, p.shape)),
  });
}

/**
 * Two inputs of different datatypes and ranks, three outputs of three datatypes, all sharing the
 * symbolic batch dim `N`: a signature a server cannot treat as "the first input, the first output".
 *
 * - input `a`: FP32 [N, 3]; input `b`: INT64 [N].
 * - output `sum`: FP32 [N, 3], `sum[i][j] = a[i][j] + float(b[i])` (b cast to float32, then
 *   broadcast along each row).
 * - output `b_twice`: INT64 [N], `b_twice[i] = b[i] * 2`.
 * - output `flag`: BOOL [N], `flag[i] = b[i] > 0` (0 and negatives give false).
 *
 * Outputs are listed in the order `sum`, `b_twice`, `flag`.
 */
function multiIoModel(): Uint8Array {
  return encodeModel({
    name: 'multi_io',
    nodes: [
      node('Cast', ['b'], ['b_float'], [int('to', DataType.FLOAT)]),
      node('Unsqueeze', ['b_float', 'axis_1'], ['b_column']),
      node('Add', ['a', 'b_column'], ['sum']),
      node('Mul', ['b', 'two'], ['b_twice']),
      node('Greater', ['b', 'zero'], ['flag']),
    ],
    initializers: [
      int64Tensor('axis_1', [1], [1]),
      int64Tensor('two', [], [2]),
      int64Tensor('zero', [], [0]),
    ],
    inputs: [valueInfo('a', 'FP32', ['N', 3]), valueInfo('b', 'INT64', ['N'])],
    outputs: [
      valueInfo('sum', 'FP32', ['N', 3]),
      valueInfo('b_twice', 'INT64', ['N']),
      valueInfo('flag', 'BOOL', ['N']),
    ],
  });
}

/**
 * Input `x` FP32 [1, 4] → output `y` FP32 [1, 4], `y = x * 2`. Its first dim is fixed at 1, so a
 * server must not coalesce requests into one run (onnxruntime rejects a [2, 4] feed).
 */
function fixedBatchModel(): Uint8Array {
  return encodeModel({
    name: 'fixed_batch',
    nodes: [node('Mul', ['x', 'two'], ['y'])],
    initializers: [floatTensor('two', [], [2])],
    inputs: [valueInfo('x', 'FP32', [1, 4])],
    outputs: [valueInfo('y', 'FP32', [1, 4])],
  });
}

/**
 * Input `image` FP32 [N, 3, H, W] (N, H and W symbolic) → output `channel_mean` FP32 [N, 3],
 * `channel_mean[n][c]` = mean of `image[n][c][h][w]` over all h and w (ReduceMean over axes 2
 * and 3, keepdims 0). A dynamic-spatial model: requests of different H×W cannot share a batch.
 */
function imageModel(): Uint8Array {
  return encodeModel({
    name: 'image_channel_mean',
    nodes: [
      node('ReduceMean', ['image'], ['channel_mean'], [ints('axes', [2, 3]), int('keepdims', 0)]),
    ],
    inputs: [valueInfo('image', 'FP32', ['N', 3, 'H', 'W'])],
    outputs: [valueInfo('channel_mean', 'FP32', ['N', 3])],
  });
}

/**
 * Input `x` FP32 [N, 2] → output `total` FP32 [1, 2], `total[0][j]` = sum over i of `x[i][j]`
 * (ReduceSum over axis 0, keepdims 1). The output's first dim is not the batch: a server that
 * coalesced requests and split the output by rows would hand out wrong (or missing) rows, so it
 * must see that the output does not carry N and run such requests one at a time.
 */
function mismatchedBatchModel(): Uint8Array {
  return encodeModel({
    name: 'mismatched_batch',
    nodes: [node('ReduceSum', ['x', 'axis_0'], ['total'], [int('keepdims', 1)])],
    initializers: [int64Tensor('axis_0', [1], [0])],
    inputs: [valueInfo('x', 'FP32', ['N', 2])],
    outputs: [valueInfo('total', 'FP32', [1, 2])],
  });
}

/**
 * Input `x` FP32 [N, 2] → output `nonzero` INT64 [K, 2]: the (row, column) index of each nonzero
 * element of `x`, in row-major order (NonZero, then Transpose). Its output's first dim is
 * symbolic like a batch dim, but it is `K`, not `N`: with every element nonzero, K = 2N. A server
 * that joined requests and split this output by rows would hand out wrong indices; each
 * request's answer must be its own indices, counted from its own first row.
 */
function nonzeroIndicesModel(): Uint8Array {
  return encodeModel({
    name: 'nonzero_indices',
    nodes: [
      node('NonZero', ['x'], ['indices']),
      node('Transpose', ['indices'], ['nonzero'], [ints('perm', [1, 0])]),
    ],
    inputs: [valueInfo('x', 'FP32', ['N', 2])],
    outputs: [valueInfo('nonzero', 'INT64', ['K', 2])],
  });
}

export {
  fixedBatchModel,
  identitiesModel,
  identityModel,
  imageModel,
  mismatchedBatchModel,
  multiIoModel,
  nonzeroIndicesModel,
  oipDatatypes,
  onnxElemTypeOf,
  ortTypeOf,
};
export type { IdentityModelOptions, IdentityPair, OipDatatype, OrtTensorType };
