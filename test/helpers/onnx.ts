// A minimal ONNX writer for tests: the protobuf wire format of a ModelProto with one graph of standard operators, so
// tests build speaker models of known behaviour themselves (no onnx package is installed, and none may be downloaded).
//
// Field numbers are onnx.proto's: ModelProto{ir_version=1, producer_name=2, graph=7, opset_import=8},
// GraphProto{node=1, name=2, initializer=5, input=11, output=12}, NodeProto{input=1, output=2, name=3, op_type=4,
// attribute=5}, AttributeProto{name=1, i=3, ints=8, type=20}, TensorProto{dims=1, data_type=2, float_data=4, name=8},
// ValueInfoProto{name=1, type=2}, TypeProto{tensor_type=1}, TypeProto.Tensor{elem_type=1, shape=2},
// TensorShapeProto{dim=1}, Dimension{dim_value=1, dim_param=2}, OperatorSetIdProto{domain=1, version=2}.

const FLOAT = 1;
const ATTRIBUTE_INT = 2;
const ATTRIBUTE_INTS = 7;

function varint(value: number): number[] {
  const out: number[] = [];
  let v = BigInt(value);
  do {
    let byte = Number(v & 0x7fn);
    v >>= 7n;
    if (v > 0n) byte |= 0x80;
    out.push(byte);
  } while (v > 0n);
  return out;
}

const key = (field: number, wire: number): number[] => varint((field << 3) | wire);
const int = (field: number, value: number): number[] => [...key(field, 0), ...varint(value)];
const bytes = (field: number, body: Uint8Array | number[]): number[] => [...key(field, 2), ...varint(body.length), ...body];
const text = (field: number, value: string): number[] => bytes(field, [...Buffer.from(value, 'utf8')]);
const message = (field: number, ...parts: number[][]): number[] => bytes(field, parts.flat());

/** A dimension: a number, or a name for one the model leaves open. */
export type Dim = number | string;

function valueInfo(field: number, name: string, shape: readonly Dim[]): number[] {
  const dims = shape.map((d) => message(1, typeof d === 'number' ? int(1, d) : text(2, d)));
  return message(field, text(1, name), message(2, message(1, int(1, FLOAT), message(2, ...dims))));
}

export interface NodeSpec {
  op: string;
  inputs: string[];
  outputs: string[];
  /** Integer attributes (keepdims) and integer-list attributes (axes). */
  attributes?: Record<string, number | number[]>;
}

export interface GraphSpec {
  input: { name: string; shape: readonly Dim[] };
  output: { name: string; shape: readonly Dim[] };
  nodes: NodeSpec[];
  /** Float constants by name, with their shapes. */
  initializers?: { name: string; dims: number[]; values: Float32Array }[];
  /** @defaultValue 13 (ReduceMean takes `axes` as an attribute up to opset 17) */
  opset?: number;
}

/** The bytes of an .onnx file holding `spec`. */
export function onnxModel(spec: GraphSpec): Buffer {
  const nodes = spec.nodes.map((n, i) => {
    const attributes = Object.entries(n.attributes ?? {}).map(([name, v]) =>
      Array.isArray(v)
        ? message(5, text(1, name), ...v.map((x) => int(8, x)), int(20, ATTRIBUTE_INTS))
        : message(5, text(1, name), int(3, v), int(20, ATTRIBUTE_INT)),
    );
    return message(1, ...n.inputs.map((x) => text(1, x)), ...n.outputs.map((x) => text(2, x)), text(3, `n${i}`), text(4, n.op), ...attributes);
  });
  const initializers = (spec.initializers ?? []).map((t) => {
    const data = Buffer.from(t.values.buffer, t.values.byteOffset, t.values.byteLength);
    return message(5, ...t.dims.map((d) => int(1, d)), int(2, FLOAT), bytes(4, [...data]), text(8, t.name));
  });
  const graph = message(7, ...nodes, text(2, 'speaker'), ...initializers, valueInfo(11, spec.input.name, spec.input.shape), valueInfo(12, spec.output.name, spec.output.shape));
  return Buffer.from([...int(1, 8), ...text(2, 'wearable-backend tests'), ...graph, ...message(8, text(1, ''), int(2, spec.opset ?? 13))]);
}

/** A seeded pseudo-random matrix, row-major, values in [-1, 1). */
export function fixedMatrix(rows: number, cols: number, seed = 7): Float32Array {
  const out = new Float32Array(rows * cols);
  let x = seed;
  for (let i = 0; i < out.length; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    out[i] = (x / 2 ** 32) * 2 - 1;
  }
  return out;
}

/**
 * A speaker model of the WeSpeaker contract: fbank [1, frames, 80] in; each band's mean square over the frames
 * (its variance, the input being mean-normalised) times a fixed [80, D] matrix out, [1, D].
 */
export function varianceModel(dimension: number, options: { bands?: number; seed?: number } = {}): { bytes: Buffer; weights: Float32Array } {
  const bands = options.bands ?? 80;
  const weights = fixedMatrix(bands, dimension, options.seed);
  const bytes = onnxModel({
    input: { name: 'feats', shape: [1, 'frames', bands] },
    output: { name: 'embs', shape: [1, dimension] },
    nodes: [
      { op: 'Mul', inputs: ['feats', 'feats'], outputs: ['squares'] },
      { op: 'ReduceMean', inputs: ['squares'], outputs: ['variance'], attributes: { axes: [1], keepdims: 0 } },
      { op: 'MatMul', inputs: ['variance', 'w'], outputs: ['embs'] },
    ],
    initializers: [{ name: 'w', dims: [bands, dimension], values: weights }],
  });
  return { bytes, weights };
}
