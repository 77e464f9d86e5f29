/**
 * The trainer's Network and named float32 weights, both ways: a global model's initializers onto
 * a Network of the given layers, and a trained Network back to named tensors. Names and dims are
 * those exportOnnx writes (dense1.weight [in, out], conv1.weight [out, in, k, k], biases [out]),
 * so what comes out replaces the global model's initializers one for one.
 */
import { ValidationError } from '../errors/index.js';
import { Network } from '../training/network.js';
import type { Layer, LayerSpec } from '../training/network.js';
import type { EncodableTensor, NamedTensors, Tensor } from './weights.js';

/** The digits' input: one 28x28 channel (flat 784 pixels in the ONNX graph). */
const digitShape = [1, 28, 28] as const;

/** The ONNX dims of a layer's [weight, bias], as exportOnnx writes them; [] without parameters. */
function layerDims(layer: Layer): number[][] {
  const spec = layer.spec;
  const inputs = layer.inShape.reduce((a, b) => a * b, 1);
  const channels = layer.inShape[0] ?? 0;
  if (spec.type === 'dense') return [[inputs, spec.units], [spec.units]];
  if (spec.type === 'conv3x3') return [[spec.outChannels, channels, 3, 3], [spec.outChannels]];
  if (spec.type === 'conv1x1') return [[spec.outChannels, channels, 1, 1], [spec.outChannels]];
  return [];
}

/** Every parameter of `network` with its ONNX dims, in the network's order. */
function parametersWithDims(network: Network) {
  return network.layers.flatMap((layer) => {
    const dims = layerDims(layer);
    return layer.params.map((param, k) => ({ param, dims: dims[k] ?? [param.value.length] }));
  });
}

const sameDims = (a: readonly number[], b: readonly number[]) =>
  a.length === b.length && a.every((d, i) => d === b[i]);

/**
 * A Network of `layers` (input [1, 28, 28] unless given) holding `weights`: each parameter must be
 * there by name with its ONNX dims, and every weight must be a parameter, so a model of another
 * architecture is refused (ValidationError) rather than half loaded.
 */
function networkFrom(
  weights: NamedTensors,
  layers: readonly LayerSpec[],
  inShape: readonly number[] = digitShape,
): Network {
  return loadWeights(new Network(inShape, layers), weights);
}

/**
 * `network` holding `weights`, as networkFrom checks them: every parameter is overwritten, so a
 * network reused from an earlier round keeps nothing of it (its gradients are zeroed before each
 * batch). A refused model may leave the parameters half written.
 */
function loadWeights(network: Network, weights: NamedTensors): Network {
  const names = new Set<string>();
  for (const { param, dims } of parametersWithDims(network)) {
    const tensor = weights.get(param.name);
    if (tensor === undefined) {
      throw new ValidationError(`the model has no tensor ${param.name}, which these layers need`);
    }
    if (!sameDims(tensor.dims, dims) || tensor.values.length !== param.value.length) {
      throw new ValidationError(
        `tensor ${param.name} has dims ${JSON.stringify(tensor.dims)}, these layers need ${JSON.stringify(dims)}`,
      );
    }
    param.value.set(tensor.values);
    names.add(param.name);
  }
  for (const name of weights.keys()) {
    if (!names.has(name)) {
      throw new ValidationError(`tensor ${name} of the model is not a parameter of these layers`);
    }
  }
  return network;
}

/** `network`'s parameters as named float32 tensors with their ONNX dims (copies). */
function weightsOf(network: Network): Map<string, Tensor> {
  return new Map(
    [...parameterTensors(network)].map(([name, { dims, values }]) => [
      name,
      { dims, values: Float32Array.from(values) },
    ]),
  );
}

/** `network`'s parameters as tensors named and shaped as its ONNX initializers (views). */
function parameterTensors(network: Network): Map<string, EncodableTensor> {
  return new Map(
    parametersWithDims(network).map(({ param, dims }) => [
      param.name,
      { dims, values: param.value },
    ]),
  );
}

export { digitShape, loadWeights, networkFrom, parameterTensors, weightsOf };
