//! The kernel IR's op table from Python: every op with its family, typing, dtypes and import
//! names, so Python tests can drive every op through the frontends (Pallas, JAX) without a
//! list of their own.

use pyo3::prelude::*;
use tpukit_dsl::{BinaryOp, CmpOp, OpInfo, ReduceOp, UnaryOp};

use crate::error::guard;

/// One row of the op table: `(family, name, typing, dtypes, mosaic names, stablehlo names)`,
/// family one of `unary`, `binary`, `compare`, `reduce`.
type Row = (
    &'static str,
    &'static str,
    String,
    Vec<&'static str>,
    Vec<&'static str>,
    Vec<&'static str>,
);

fn row(family: &'static str, info: &'static OpInfo) -> Row {
    (
        family,
        info.name,
        format!("{:?}", info.typing).to_lowercase(),
        info.typing.dtypes().iter().map(|d| d.name()).collect(),
        info.mosaic.to_vec(),
        info.stablehlo.to_vec(),
    )
}

/// Every row of the op table, family by family, in table order.
#[pyfunction]
pub fn op_table() -> PyResult<Vec<Row>> {
    guard(None, || {
        let unary = UnaryOp::ALL.iter().map(|o| row("unary", o.info()));
        let binary = BinaryOp::ALL.iter().map(|o| row("binary", o.info()));
        let compare = CmpOp::ALL.iter().map(|o| row("compare", o.info()));
        let reduce = ReduceOp::ALL.iter().map(|o| row("reduce", o.info()));
        Ok(unary.chain(binary).chain(compare).chain(reduce).collect())
    })
}
