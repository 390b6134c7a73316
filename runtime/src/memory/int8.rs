//! Runs an ONNX model's int8 weights as int8 arithmetic.
//!
//! The provisioned all-MiniLM-L6-v2 stores its weights as int8 with a per-column scale and dequantizes them in the
//! graph: `MatMul(A, Mul(Cast(W_int8), scale))`. ONNX Runtime folds that constant subgraph into fp32 weights when the
//! session is created, so every query multiplies fp32: about 42 MB of weights read per model call, which is most of
//! a short query's time on a small machine. [`int8_matmuls`] rewrites each such `MatMul` as the dynamic quantization
//! of its activations and an integer product over the stored weights, unchanged:
//!
//! ```text
//! (Aq, As, Az) = DynamicQuantizeLinear(A)
//! Y = Cast<float>(MatMulInteger(Aq, W_int8, Az)) * (As * scale)
//! ```
//!
//! which ONNX Runtime fuses into one quantized kernel. Only the activations are rounded (to 8 bits, per call); the
//! weights are the ones the model ships.
//!
//! The rewrite works on the protobuf wire format, touching only the graph's nodes and the `value_info` of the
//! tensors it removes; every other byte is copied as it was. A model without the pattern comes back unchanged.
//!
//! Useful for: [`super::Embedder::load`]. Not for: models quantized some other way (they already run as they are).

use std::collections::{HashMap, HashSet};

/// What the rewrite did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rewritten {
    /// The model, as bytes of an ONNX `ModelProto`.
    pub model: Vec<u8>,
    /// How many `MatMul`s now multiply int8.
    pub matmuls: usize,
}

/// Why a model could not be read as protobuf; the caller then loads it as it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not an ONNX model this rewrite can read: {0}")]
pub struct Unreadable(&'static str);

/// Rewrites every `MatMul(A, Mul(Cast(W_int8), scale))` of `model` whose weight is a matrix, whose scale is one per
/// output column (or one for all), and whose dequantized weight feeds nothing else.
pub fn int8_matmuls(model: &[u8]) -> Result<Rewritten, Unreadable> {
    let fields = wire::fields(model)?;
    let mut out = Vec::with_capacity(model.len() + 4096);
    let mut matmuls = 0;
    let mut graphs = 0;
    for field in &fields {
        match field {
            wire::Field { number: MODEL_GRAPH, value: wire::Value::Bytes(graph), .. } => {
                graphs += 1;
                let (graph, n) = rewrite_graph(graph)?;
                matmuls += n;
                wire::put_bytes(&mut out, MODEL_GRAPH, &graph);
            }
            other => out.extend_from_slice(other.raw),
        }
    }
    if graphs != 1 {
        return Err(Unreadable("a model has exactly one graph"));
    }
    Ok(Rewritten { model: out, matmuls })
}

// Field numbers of onnx.proto (stable since ONNX 1.0).
const MODEL_GRAPH: u32 = 7;
const GRAPH_NODE: u32 = 1;
const GRAPH_INITIALIZER: u32 = 5;
const GRAPH_VALUE_INFO: u32 = 13;
const NODE_INPUT: u32 = 1;
const NODE_OUTPUT: u32 = 2;
const NODE_NAME: u32 = 3;
const NODE_OP_TYPE: u32 = 4;
const NODE_ATTRIBUTE: u32 = 5;
const NODE_DOMAIN: u32 = 7;
const TENSOR_DIMS: u32 = 1;
const TENSOR_DATA_TYPE: u32 = 2;
const TENSOR_NAME: u32 = 8;
const VALUE_INFO_NAME: u32 = 1;
const ATTRIBUTE_NAME: u32 = 1;
const ATTRIBUTE_I: u32 = 3;
const ATTRIBUTE_TYPE: u32 = 20;
/// `AttributeProto.AttributeType.INT`.
const ATTRIBUTE_TYPE_INT: u64 = 2;
/// `TensorProto.DataType.FLOAT`.
const DATA_TYPE_FLOAT: u64 = 1;
/// `TensorProto.DataType.INT8`.
const DATA_TYPE_INT8: u64 = 3;

/// A node as far as the rewrite needs it.
#[derive(Debug)]
struct Node<'a> {
    inputs: Vec<&'a str>,
    outputs: Vec<&'a str>,
    name: &'a str,
    op_type: &'a str,
    /// Nodes of another operator set are never matched.
    domain: &'a str,
}

impl<'a> Node<'a> {
    fn parse(bytes: &'a [u8]) -> Result<Node<'a>, Unreadable> {
        let mut node = Node { inputs: Vec::new(), outputs: Vec::new(), name: "", op_type: "", domain: "" };
        for field in wire::fields(bytes)? {
            let wire::Value::Bytes(value) = field.value else { continue };
            let text = || std::str::from_utf8(value).map_err(|_| Unreadable("a node's string is not UTF-8"));
            match field.number {
                NODE_INPUT => node.inputs.push(text()?),
                NODE_OUTPUT => node.outputs.push(text()?),
                NODE_NAME => node.name = text()?,
                NODE_OP_TYPE => node.op_type = text()?,
                NODE_DOMAIN => node.domain = text()?,
                _ => {}
            }
        }
        Ok(node)
    }

    fn is(&self, op_type: &str) -> bool {
        self.op_type == op_type && (self.domain.is_empty() || self.domain == "ai.onnx")
    }
}

/// One matched `MatMul`: the nodes it replaces and what the new ones read and write.
struct Match<'a> {
    matmul: usize,
    cast: usize,
    mul: usize,
    activations: &'a str,
    weights: &'a str,
    scale: &'a str,
    output: &'a str,
    dequantized: [&'a str; 2],
}

fn rewrite_graph(graph: &[u8]) -> Result<(Vec<u8>, usize), Unreadable> {
    let fields = wire::fields(graph)?;
    let mut nodes = Vec::new();
    // Initializers by name: (data type, dims).
    let mut constant: HashMap<&str, (u64, Vec<u64>)> = HashMap::new();
    for field in &fields {
        let wire::Value::Bytes(bytes) = field.value else { continue };
        match field.number {
            GRAPH_NODE => nodes.push(Node::parse(bytes)?),
            GRAPH_INITIALIZER => {
                let tensor = initializer(bytes)?;
                constant.insert(tensor.name, (tensor.data_type, tensor.dims));
            }
            _ => {}
        }
    }
    let mut producer = HashMap::new();
    let mut readers: HashMap<&str, usize> = HashMap::new();
    for (at, node) in nodes.iter().enumerate() {
        for output in &node.outputs {
            producer.insert(*output, at);
        }
        for input in &node.inputs {
            *readers.entry(input).or_default() += 1;
        }
    }
    let mut matches = Vec::new();
    for (at, node) in nodes.iter().enumerate() {
        if !node.is("MatMul") || node.inputs.len() != 2 || node.outputs.len() != 1 {
            continue;
        }
        let Some(&mul) = producer.get(node.inputs[1]) else { continue };
        let mul_node = &nodes[mul];
        if !mul_node.is("Mul") || mul_node.inputs.len() != 2 {
            continue;
        }
        let found = mul_node.inputs.iter().enumerate().find_map(|(side, input)| {
            let cast = *producer.get(input)?;
            let scale = mul_node.inputs[1 - side];
            let cast_node = &nodes[cast];
            let weights = *cast_node.inputs.first()?;
            let (weight_type, weight_dims) = constant.get(weights)?;
            let (_, scale_dims) = constant.get(scale)?;
            (cast_node.is("Cast") && *weight_type == DATA_TYPE_INT8 && scales_columns(weight_dims, scale_dims))
                .then_some((cast, scale))
        });
        let Some((cast, scale)) = found else { continue };
        let cast_output = nodes[cast].outputs.first().copied().unwrap_or_default();
        if readers.get(cast_output) != Some(&1) || readers.get(mul_node.outputs[0]) != Some(&1) {
            continue;
        }
        matches.push(Match {
            matmul: at,
            cast,
            mul,
            activations: node.inputs[0],
            weights: nodes[cast].inputs[0],
            scale,
            output: node.outputs[0],
            dequantized: [cast_output, mul_node.outputs[0]],
        });
    }
    if matches.is_empty() {
        return Ok((graph.to_vec(), 0));
    }
    let dropped: HashSet<usize> = matches.iter().flat_map(|m| [m.cast, m.mul]).collect();
    let replaced: HashMap<usize, &Match> = matches.iter().map(|m| (m.matmul, m)).collect();
    let removed: HashSet<&str> = matches.iter().flat_map(|m| m.dequantized).collect();
    let taken: HashSet<&str> = nodes.iter().flat_map(|n| n.outputs.iter().copied().chain([n.name])).collect();

    let mut out = Vec::with_capacity(graph.len() + 4096);
    let mut at = 0;
    for field in &fields {
        match (field.number, &field.value) {
            (GRAPH_NODE, _) => {
                let index = at;
                at += 1;
                if dropped.contains(&index) {
                    continue;
                }
                match replaced.get(&index) {
                    Some(m) => quantized_matmul(&mut out, m, index, &taken),
                    None => out.extend_from_slice(field.raw),
                }
            }
            (GRAPH_VALUE_INFO, wire::Value::Bytes(info)) if removed.contains(value_info_name(info)?) => {}
            _ => out.extend_from_slice(field.raw),
        }
    }
    Ok((out, matches.len()))
}

/// Writes the five nodes that replace one matched `MatMul`, named after it.
fn quantized_matmul(out: &mut Vec<u8>, m: &Match, index: usize, taken: &HashSet<&str>) {
    let mut prefix = format!("int8_matmul_{index}");
    while taken.iter().any(|name| name.starts_with(prefix.as_str())) {
        prefix.push('_');
    }
    let name = |suffix: &str| format!("{prefix}_{suffix}");
    let (aq, a_scale, a_zero) = (name("aq"), name("as"), name("az"));
    let (product, product_f, scale) = (name("yi"), name("yf"), name("scale"));
    let cast_to_float = attribute_int("to", DATA_TYPE_FLOAT);
    let node = |out: &mut Vec<u8>, step: &str, op_type: &str, inputs: &[&str], outputs: &[&str]| {
        let attribute = (op_type == "Cast").then_some(cast_to_float.as_slice());
        put_node(out, &name(step), op_type, inputs, outputs, attribute);
    };
    node(out, "0", "DynamicQuantizeLinear", &[m.activations], &[&aq, &a_scale, &a_zero]);
    node(out, "1", "MatMulInteger", &[&aq, m.weights, &a_zero], &[&product]);
    node(out, "2", "Cast", &[&product], &[&product_f]);
    node(out, "3", "Mul", &[&a_scale, m.scale], &[&scale]);
    node(out, "4", "Mul", &[&product_f, &scale], &[m.output]);
}

/// Writes one node of the default operator set into a graph.
fn put_node(out: &mut Vec<u8>, name: &str, op_type: &str, inputs: &[&str], outputs: &[&str], attribute: Option<&[u8]>) {
    wire::put_bytes(out, GRAPH_NODE, &node_bytes(name, op_type, inputs, outputs, attribute));
}

/// A `NodeProto` of the default operator set.
fn node_bytes(name: &str, op_type: &str, inputs: &[&str], outputs: &[&str], attribute: Option<&[u8]>) -> Vec<u8> {
    let mut node = Vec::new();
    for input in inputs {
        wire::put_bytes(&mut node, NODE_INPUT, input.as_bytes());
    }
    for output in outputs {
        wire::put_bytes(&mut node, NODE_OUTPUT, output.as_bytes());
    }
    wire::put_bytes(&mut node, NODE_NAME, name.as_bytes());
    wire::put_bytes(&mut node, NODE_OP_TYPE, op_type.as_bytes());
    if let Some(attribute) = attribute {
        wire::put_bytes(&mut node, NODE_ATTRIBUTE, attribute);
    }
    node
}

fn attribute_int(name: &str, value: u64) -> Vec<u8> {
    let mut attribute = Vec::new();
    wire::put_bytes(&mut attribute, ATTRIBUTE_NAME, name.as_bytes());
    wire::put_varint_field(&mut attribute, ATTRIBUTE_I, value);
    wire::put_varint_field(&mut attribute, ATTRIBUTE_TYPE, ATTRIBUTE_TYPE_INT);
    attribute
}

/// What the rewrite needs of an initializer.
struct Initializer<'a> {
    name: &'a str,
    data_type: u64,
    dims: Vec<u64>,
}

fn initializer(bytes: &[u8]) -> Result<Initializer<'_>, Unreadable> {
    let mut tensor = Initializer { name: "", data_type: 0, dims: Vec::new() };
    for field in wire::fields(bytes)? {
        match (field.number, field.value) {
            (TENSOR_NAME, wire::Value::Bytes(value)) => {
                tensor.name = std::str::from_utf8(value).map_err(|_| Unreadable("a tensor name is not UTF-8"))?;
            }
            (TENSOR_DATA_TYPE, wire::Value::Varint(value)) => tensor.data_type = value,
            (TENSOR_DIMS, wire::Value::Varint(value)) => tensor.dims.push(value),
            (TENSOR_DIMS, wire::Value::Bytes(packed)) => tensor.dims.extend(wire::packed_varints(packed)?),
            _ => {}
        }
    }
    Ok(tensor)
}

/// Whether a scale of shape `scale` multiplies whole output columns of a weight of shape `weight` (`[K, N]`): a
/// scalar, `[1]`, `[N]` or `[1, N]`. Only such a scale can be applied after the integer product.
fn scales_columns(weight: &[u64], scale: &[u64]) -> bool {
    let [_, columns] = weight else { return false };
    match scale {
        [] | [1] => true,
        [n] | [1, n] => n == columns,
        _ => false,
    }
}

fn value_info_name(bytes: &[u8]) -> Result<&str, Unreadable> {
    for field in wire::fields(bytes)? {
        if let (VALUE_INFO_NAME, wire::Value::Bytes(value)) = (field.number, field.value) {
            return std::str::from_utf8(value).map_err(|_| Unreadable("a value name is not UTF-8"));
        }
    }
    Ok("")
}

/// The protobuf wire format, as far as reading fields and writing strings, messages and integers go.
pub(crate) mod wire {
    use super::Unreadable;

    /// One field of a message, with the bytes it was read from.
    #[derive(Debug, Clone, Copy)]
    pub(crate) struct Field<'a> {
        pub(crate) number: u32,
        pub(crate) value: Value<'a>,
        /// The whole field: key and value, as in the message.
        pub(crate) raw: &'a [u8],
    }

    /// A field's value by wire type (fixed-width values are kept as their bytes).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(crate) enum Value<'a> {
        Varint(u64),
        Fixed(&'a [u8]),
        Bytes(&'a [u8]),
    }

    fn varint(buf: &[u8], at: &mut usize) -> Result<u64, Unreadable> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *buf.get(*at).ok_or(Unreadable("a varint runs past the end"))?;
            *at += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(Unreadable("a varint is longer than ten bytes"))
    }

    /// The fields of one message, in order.
    pub(crate) fn fields(buf: &[u8]) -> Result<Vec<Field<'_>>, Unreadable> {
        let mut fields = Vec::new();
        let mut at = 0;
        while at < buf.len() {
            let start = at;
            let key = varint(buf, &mut at)?;
            let number = u32::try_from(key >> 3).map_err(|_| Unreadable("a field number is too large"))?;
            let take = |n: usize, at: &mut usize| {
                let end =
                    at.checked_add(n).filter(|&end| end <= buf.len()).ok_or(Unreadable("a field runs past the end"))?;
                let bytes = &buf[*at..end];
                *at = end;
                Ok::<_, Unreadable>(bytes)
            };
            let value = match key & 7 {
                0 => Value::Varint(varint(buf, &mut at)?),
                1 => Value::Fixed(take(8, &mut at)?),
                2 => {
                    let len =
                        usize::try_from(varint(buf, &mut at)?).map_err(|_| Unreadable("a length is too large"))?;
                    Value::Bytes(take(len, &mut at)?)
                }
                5 => Value::Fixed(take(4, &mut at)?),
                _ => return Err(Unreadable("a field has a wire type ONNX does not use")),
            };
            if number == 0 {
                return Err(Unreadable("a field is numbered 0"));
            }
            fields.push(Field { number, value, raw: &buf[start..at] });
        }
        Ok(fields)
    }

    /// The integers of a packed repeated field.
    pub(crate) fn packed_varints(buf: &[u8]) -> Result<Vec<u64>, Unreadable> {
        let mut values = Vec::new();
        let mut at = 0;
        while at < buf.len() {
            values.push(varint(buf, &mut at)?);
        }
        Ok(values)
    }

    fn put_varint(out: &mut Vec<u8>, mut value: u64) {
        while value >= 0x80 {
            out.push((value as u8 & 0x7f) | 0x80);
            value >>= 7;
        }
        out.push(value as u8);
    }

    /// Writes a length-delimited field (a string, bytes or a message).
    pub(crate) fn put_bytes(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
        put_varint(out, u64::from(number) << 3 | 2);
        put_varint(out, bytes.len() as u64);
        out.extend_from_slice(bytes);
    }

    /// Writes an integer field.
    pub(crate) fn put_varint_field(out: &mut Vec<u8>, number: u32, value: u64) {
        put_varint(out, u64::from(number) << 3);
        put_varint(out, value);
    }
}

#[cfg(test)]
mod tests {
    use super::wire::{self, Field, Value};
    use super::*;

    fn node(op_type: &str, inputs: &[&str], outputs: &[&str]) -> Vec<u8> {
        node_bytes("", op_type, inputs, outputs, None)
    }

    fn tensor(name: &str, data_type: u64, dims: &[u64]) -> Vec<u8> {
        let mut tensor = Vec::new();
        for dim in dims {
            wire::put_varint_field(&mut tensor, TENSOR_DIMS, *dim);
        }
        wire::put_varint_field(&mut tensor, TENSOR_DATA_TYPE, data_type);
        wire::put_bytes(&mut tensor, TENSOR_NAME, name.as_bytes());
        tensor
    }

    fn value_info(name: &str) -> Vec<u8> {
        let mut info = Vec::new();
        wire::put_bytes(&mut info, VALUE_INFO_NAME, name.as_bytes());
        info
    }

    /// `x → MatMul(x, Mul(Cast(w), s)) → Relu`, with `extra` nodes after, a value_info for the dequantized weight
    /// and fields around the graph that the rewrite must copy as they are.
    fn model(extra: &[Vec<u8>]) -> Vec<u8> {
        let mut graph = Vec::new();
        wire::put_bytes(&mut graph, GRAPH_NODE, &node("Cast", &["w"], &["w_f"]));
        wire::put_bytes(&mut graph, GRAPH_NODE, &node("Mul", &["w_f", "s"], &["w_d"]));
        wire::put_bytes(&mut graph, GRAPH_NODE, &node("MatMul", &["x", "w_d"], &["y"]));
        wire::put_bytes(&mut graph, GRAPH_NODE, &node("Relu", &["y"], &["z"]));
        for node in extra {
            wire::put_bytes(&mut graph, GRAPH_NODE, node);
        }
        wire::put_bytes(&mut graph, 2, b"tiny");
        wire::put_bytes(&mut graph, GRAPH_INITIALIZER, &tensor("w", DATA_TYPE_INT8, &[4, 3]));
        wire::put_bytes(&mut graph, GRAPH_INITIALIZER, &tensor("s", DATA_TYPE_FLOAT, &[1, 3]));
        wire::put_bytes(&mut graph, GRAPH_VALUE_INFO, &value_info("w_d"));
        wire::put_bytes(&mut graph, GRAPH_VALUE_INFO, &value_info("y"));
        let mut model = Vec::new();
        wire::put_varint_field(&mut model, 1, 10); // ir_version
        wire::put_bytes(&mut model, MODEL_GRAPH, &graph);
        wire::put_bytes(&mut model, 8, &[8, 17]); // opset_import { version: 17 }
        model
    }

    fn graph_of(model: &[u8]) -> Vec<u8> {
        let fields = wire::fields(model).expect("model");
        let graph = fields.iter().find(|f| f.number == MODEL_GRAPH).expect("graph");
        let Value::Bytes(bytes) = graph.value else { panic!("graph is a message") };
        bytes.to_vec()
    }

    fn ops(graph: &[u8]) -> Vec<(String, Vec<String>, Vec<String>)> {
        wire::fields(graph)
            .expect("graph")
            .iter()
            .filter(|f| f.number == GRAPH_NODE)
            .map(|f| {
                let Value::Bytes(bytes) = f.value else { panic!("a node is a message") };
                let node = Node::parse(bytes).expect("node");
                let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
                (node.op_type.to_owned(), strings(&node.inputs), strings(&node.outputs))
            })
            .collect()
    }

    #[test]
    fn a_dequantized_matmul_becomes_an_integer_product_over_the_same_weights() {
        let original = model(&[]);
        let rewritten = int8_matmuls(&original).expect("rewrite");
        assert_eq!(rewritten.matmuls, 1);
        let graph = graph_of(&rewritten.model);
        let ops = ops(&graph);
        let names: Vec<&str> = ops.iter().map(|(op, _, _)| op.as_str()).collect();
        assert_eq!(names, ["DynamicQuantizeLinear", "MatMulInteger", "Cast", "Mul", "Mul", "Relu"]);
        let (dql, mmi, cast, scale, out) = (&ops[0], &ops[1], &ops[2], &ops[3], &ops[4]);
        assert_eq!(dql.1, ["x"]);
        assert_eq!(mmi.1, [dql.2[0].clone(), "w".into(), dql.2[2].clone()], "activations, stored int8 weights, zero");
        assert_eq!(cast.1, mmi.2);
        assert_eq!(scale.1, [dql.2[1].clone(), "s".into()], "the activations' scale times the weights' own");
        assert_eq!(out.1, [cast.2[0].clone(), scale.2[0].clone()]);
        assert_eq!(out.2, ["y"], "the MatMul's output keeps its name for the nodes after it");
        // The Cast is to float: its attribute `to` = 1.
        let cast_node = wire::fields(&graph).expect("graph").into_iter().filter(|f| f.number == GRAPH_NODE).nth(2);
        let Some(Field { value: Value::Bytes(cast_bytes), .. }) = cast_node else { panic!("the cast node") };
        let attribute = wire::fields(cast_bytes).expect("node").into_iter().find(|f| f.number == NODE_ATTRIBUTE);
        let Some(Field { value: Value::Bytes(attribute), .. }) = attribute else { panic!("Cast has `to`") };
        let values: Vec<(u32, Value)> =
            wire::fields(attribute).expect("attr").iter().map(|f| (f.number, f.value)).collect();
        assert_eq!(
            values,
            [
                (ATTRIBUTE_NAME, Value::Bytes(b"to")),
                (ATTRIBUTE_I, Value::Varint(1)),
                (ATTRIBUTE_TYPE, Value::Varint(2))
            ]
        );
        // The removed tensor's value_info goes; the graph's other fields and the model's are kept byte for byte.
        let infos: Vec<&str> = wire::fields(&graph)
            .expect("graph")
            .iter()
            .filter_map(|f| match f.value {
                Value::Bytes(b) if f.number == GRAPH_VALUE_INFO => Some(value_info_name(b).expect("name")),
                _ => None,
            })
            .collect();
        assert_eq!(infos, ["y"]);
        let others = |model: &[u8]| -> Vec<Vec<u8>> {
            wire::fields(model)
                .expect("model")
                .iter()
                .filter(|f| f.number != MODEL_GRAPH)
                .map(|f| f.raw.to_vec())
                .collect()
        };
        assert_eq!(others(&rewritten.model), others(&original));
        let initializers = |graph: &[u8]| -> Vec<Vec<u8>> {
            wire::fields(graph)
                .expect("g")
                .iter()
                .filter(|f| f.number == GRAPH_INITIALIZER)
                .map(|f| f.raw.to_vec())
                .collect()
        };
        assert_eq!(initializers(&graph), initializers(&graph_of(&original)));
    }

    #[test]
    fn a_weight_read_twice_a_float_weight_or_a_scale_per_row_is_left_alone() {
        let shared = model(&[node("Identity", &["w_d"], &["w_copy"])]);
        let left = int8_matmuls(&shared).expect("rewrite");
        assert_eq!((left.matmuls, left.model), (0, shared), "the weight is read by another node too");

        let mut graph = Vec::new();
        wire::put_bytes(&mut graph, GRAPH_NODE, &node("Cast", &["w"], &["w_f"]));
        wire::put_bytes(&mut graph, GRAPH_NODE, &node("Mul", &["w_f", "s"], &["w_d"]));
        wire::put_bytes(&mut graph, GRAPH_NODE, &node("MatMul", &["x", "w_d"], &["y"]));
        let with = |weight: Vec<u8>, scale: Vec<u8>| {
            let mut graph = graph.clone();
            wire::put_bytes(&mut graph, GRAPH_INITIALIZER, &weight);
            wire::put_bytes(&mut graph, GRAPH_INITIALIZER, &scale);
            let mut model = Vec::new();
            wire::put_bytes(&mut model, MODEL_GRAPH, &graph);
            int8_matmuls(&model).expect("rewrite").matmuls
        };
        let float = tensor("w", DATA_TYPE_FLOAT, &[4, 3]);
        assert_eq!(with(float, tensor("s", DATA_TYPE_FLOAT, &[1, 3])), 0, "a float weight is not an int8 one");
        // A scale per input row cannot be applied after the product; per column (or one for all) can.
        let int8 = || tensor("w", DATA_TYPE_INT8, &[4, 3]);
        assert_eq!(with(int8(), tensor("s", DATA_TYPE_FLOAT, &[4, 1])), 0, "a scale per row");
        assert_eq!(with(int8(), tensor("s", DATA_TYPE_FLOAT, &[4, 3])), 0, "a scale per element");
        assert_eq!(with(tensor("w", DATA_TYPE_INT8, &[2, 4, 3]), tensor("s", DATA_TYPE_FLOAT, &[])), 0, "3-D");
        for columns in [&[][..], &[1], &[3], &[1, 3]] {
            assert_eq!(with(int8(), tensor("s", DATA_TYPE_FLOAT, columns)), 1, "scale {columns:?}");
        }
        // Dims written packed, as most exporters do, read the same.
        let mut packed = Vec::new();
        wire::put_bytes(&mut packed, TENSOR_DIMS, &[4, 3]);
        wire::put_varint_field(&mut packed, TENSOR_DATA_TYPE, DATA_TYPE_INT8);
        wire::put_bytes(&mut packed, TENSOR_NAME, b"w");
        assert_eq!(with(packed, tensor("s", DATA_TYPE_FLOAT, &[1, 3])), 1, "packed dims");
    }

    #[test]
    fn bytes_that_are_not_a_model_are_refused_not_guessed_at() {
        assert!(int8_matmuls(b"\x3a\xff\xff\xff").is_err(), "a graph whose length runs past the end");
        assert!(int8_matmuls(&[0x08]).is_err(), "a varint cut short");
        assert!(int8_matmuls(&[0x0f]).is_err(), "wire type 7");
        assert!(int8_matmuls(&[0x08, 0x01]).is_err(), "a model without a graph");
    }
}
