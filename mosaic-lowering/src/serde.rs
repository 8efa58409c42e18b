//! The serialized body: what `mosaic-serde{serialize=true}` and `write_bytecode` produce in
//! JAX, done here without jaxlib.
//!
//! Every op but `builtin.module` is renamed `stable_mosaic.<name>`, which makes it an
//! unregistered op whose attributes (inherent ones included: `sym_name`, `function_type`,
//! `operandSegmentSizes`, …) all live in its attribute dictionary; the module carries
//! `stable_mosaic.version`. The result is written as MLIR bytecode of version 0, which
//! libtpu's reader accepts whatever MLIR wrote it, and base64-encoded into the custom call.

use crate::emit::Val;
use base64::Engine;
use melior::{
    Context,
    ir::{
        Attribute, Block, BlockLike, Identifier, Location, Module, Operation, OperationRef, Region,
        RegionLike, Value, ValueLike,
        bytecode_writer_config::BytecodeWriterConfig,
        operation::{OperationBuilder, OperationLike, OperationMutLike},
    },
};
use std::collections::HashMap;
use tpukit_dsl::{Error, ErrorKind, Result};

/// The module in its serialized form (`stable_mosaic.*` op names).
pub fn mangle<'c>(context: &'c Context, module: &Module<'c>, version: i64) -> Result<Module<'c>> {
    let mut out = Module::new(Location::unknown(context));
    out.as_operation_mut().set_attribute(
        "stable_mosaic.version",
        Attribute::parse(context, &format!("{version} : i64")).expect("an i64 attribute"),
    );
    let mut values = HashMap::new();
    let mut op = module.body().first_operation();
    while let Some(o) = op {
        out.body()
            .append_operation(mangle_op(context, &o, version, &mut values)?);
        op = o.next_in_block();
    }
    Ok(out)
}

/// Raw value handles of the source module → their copies.
type ValueMap<'c> = HashMap<usize, Val<'c>>;

fn key(v: mlir_sys::MlirValue) -> usize {
    v.ptr as usize
}

fn mangle_op<'c>(
    context: &'c Context,
    op: &OperationRef<'c, '_>,
    version: i64,
    values: &mut ValueMap<'c>,
) -> Result<Operation<'c>> {
    let name = format!(
        "stable_mosaic.{}",
        op.name().as_string_ref().as_str().expect("utf-8")
    );
    let operands: Vec<Val<'c>> = op.operands().map(|v| values[&key(v.to_raw())]).collect();
    let results: Vec<_> = op.results().map(|r| r.r#type()).collect();
    let attributes = downgrade(context, &name, op.attributes().collect(), version);
    let mut regions = Vec::new();
    for region in op.regions() {
        let copy = Region::new();
        let mut block = region.first_block();
        while let Some(b) = block {
            let args: Vec<_> = (0..b.argument_count())
                .map(|i| {
                    let a = b.argument(i).expect("argument in range");
                    (a.r#type(), op.location())
                })
                .collect();
            let new = Block::new(&args);
            for i in 0..b.argument_count() {
                let old = b.argument(i).expect("argument in range");
                let arg = new.argument(i).expect("argument in range");
                // SAFETY: see `emit::Val`.
                values.insert(key(old.to_raw()), unsafe { Value::from_raw(arg.to_raw()) });
            }
            let mut inner = b.first_operation();
            while let Some(o) = inner {
                let copied = new.append_operation(mangle_op(context, &o, version, values)?);
                for (old, newer) in o.results().zip(copied.results()) {
                    // SAFETY: see `emit::Val`.
                    values.insert(key(old.to_raw()), unsafe {
                        Value::from_raw(newer.to_raw())
                    });
                }
                inner = o.next_in_block();
            }
            copy.append_block(new);
            block = b.next_in_region();
        }
        regions.push(copy);
    }
    OperationBuilder::new(&name, op.location())
        .add_operands(&operands)
        .add_results(&results)
        .add_attributes(&attributes)
        .add_regions_vec(regions)
        .build()
        .map_err(|e| {
            Error::new(format!("internal error serializing `{name}`: {e}"))
                .with_kind(ErrorKind::Internal)
        })
}

/// The serde version that gave `tpu.matmul` its `transpose_lhs_hint`.
const TRANSPOSE_LHS_HINT_VERSION: i64 = 13;

/// The serde version that gave `tpu.enqueue_dma` and `tpu.sem_signal` their last optional
/// operand, `subcore_id` (checked against jaxlib's `mosaic-serde` for versions 11 to 15).
const SUBCORE_ID_VERSION: i64 = 14;

/// An op's attributes as `mosaic-serde{serialize=true target-version=version}` writes them:
/// - below version 13, `tpu.matmul` drops `transpose_lhs_hint` and carries the older
///   `transpose_lhs = false, transpose_rhs = false` (what jax 0.10.2 writes for version 11);
/// - below version 14, `tpu.enqueue_dma` and `tpu.sem_signal` have no `subcore_id` segment
///   in their `operandSegmentSizes` (the lowering never passes one: it is empty).
fn downgrade<'c>(
    context: &'c Context,
    name: &str,
    attributes: Vec<(Identifier<'c>, Attribute<'c>)>,
    version: i64,
) -> Vec<(Identifier<'c>, Attribute<'c>)> {
    match name {
        "stable_mosaic.tpu.matmul" if version < TRANSPOSE_LHS_HINT_VERSION => {
            let mut out: Vec<_> = attributes
                .into_iter()
                .filter(|(k, _)| k.as_string_ref().as_str() != Ok("transpose_lhs_hint"))
                .collect();
            let no = Attribute::parse(context, "false").expect("a bool attribute");
            for key in ["transpose_lhs", "transpose_rhs"] {
                out.push((Identifier::new(context, key), no));
            }
            out
        }
        "stable_mosaic.tpu.enqueue_dma" | "stable_mosaic.tpu.sem_signal"
            if version < SUBCORE_ID_VERSION =>
        {
            attributes
                .into_iter()
                .map(|(k, v)| match k.as_string_ref().as_str() {
                    Ok("operandSegmentSizes") => (k, without_last_segment(context, v)),
                    _ => (k, v),
                })
                .collect()
        }
        _ => attributes,
    }
}

/// `array<i32: a, …, y, 0>` without its last (empty) segment.
fn without_last_segment<'c>(context: &'c Context, sizes: Attribute<'c>) -> Attribute<'c> {
    let text = sizes.to_string();
    let kept = text
        .strip_suffix(", 0>")
        .unwrap_or_else(|| panic!("a trailing empty segment in {text}"));
    Attribute::parse(context, &format!("{kept}>")).expect("a dense i32 array")
}

/// MLIR bytecode, version 0, of the serialized module.
pub fn bytecode(module: &Module) -> Result<Vec<u8>> {
    let config = BytecodeWriterConfig::new();
    config.set_desired_emit_version(0);
    module
        .as_operation()
        .write_bytecode_with_config(&config)
        .map_err(|e| {
            Error::new(format!("cannot write the Mosaic bytecode: {e}"))
                .with_kind(ErrorKind::Internal)
        })
}

/// Standard base64 with padding, as `base64.b64encode`.
pub fn base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
