/**
 * A real ONNX model whose run fails for some inputs that fit its signature: `index` INT64 [N]
 * picks rows of a constant table, `row` FP32 [N, 2] = table[index]. An index outside 0..9 makes
 * onnxruntime's Gather refuse the run ("indices element out of data bounds"), the way a model's
 * own constraints refuse inputs the signature allows. Built with onnx-proto, opset 13.
 */
import onnxProto from 'onnx-proto';

const { onnx } = onnxProto;
const DataType = onnx.TensorProto.DataType;

/** Rows in the table: valid indices are 0 to tableRows - 1. */
const tableRows = 10;

/** Row i of the table: [i, 10 * i]. */
const tableRow = (i: number) => [i, 10 * i];

function gatherModel(): Uint8Array {
  const table = Float32Array.from(Array.from({ length: tableRows }, (_, i) => tableRow(i)).flat());
  const valueInfo = (name: string, elemType: number, dims: Array<number | string>) =>
    onnx.ValueInfoProto.create({
      name,
      type: {
        tensorType: {
          elemType,
          shape: {
            dim: dims.map((d) => (typeof d === 'number' ? { dimValue: d } : { dimParam: d })),
          },
        },
      },
    });
  const model = onnx.ModelProto.create({
    irVersion: 8,
    opsetImport: [{ domain: '', version: 13 }],
    producerName: 'edgeai-tests',
    graph: onnx.GraphProto.create({
      name: 'gather_rows',
      node: [
        onnx.NodeProto.create({
          opType: 'Gather',
          name: 'gather',
          input: ['table', 'index'],
          output: ['row'],
          attribute: [
            onnx.AttributeProto.create({
              name: 'axis',
              type: onnx.AttributeProto.AttributeType.INT,
              i: 0,
            }),
          ],
        }),
      ],
      initializer: [
        onnx.TensorProto.create({
          name: 'table',
          dataType: DataType.FLOAT,
          dims: [tableRows, 2],
          rawData: new Uint8Array(table.buffer),
        }),
      ],
      input: [valueInfo('index', DataType.INT64, ['N'])],
      output: [valueInfo('row', DataType.FLOAT, ['N', 2])],
    }),
  });
  return onnx.ModelProto.encode(model).finish();
}

export { gatherModel, tableRow, tableRows };
