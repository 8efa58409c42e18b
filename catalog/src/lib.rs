//! The kernels tpukit ships. Each file holds one `#[tpu_kernel]` and the call spec it is
//! launched with; [`CATALOG`] lists them for tools (`tpukit list`, `tpukit lower`), and the
//! examples run them.

// `#[tpu_kernel]` names the DSL as `::tpukit::dsl` (the facade's path to it); here that is
// this crate, which re-exports the DSL under that name.
extern crate self as tpukit;
#[doc(hidden)]
pub use tpukit_dsl as dsl;

/// What the kernel files need: the macro and the call-spec types.
mod prelude {
    pub use crate::dsl::{
        ArraySpec, BlockDim, CallSpec, DType, Dim, Extent, GridAxis, grid, prefetch,
    };
    pub use tpukit_macros::tpu_kernel;
}

pub mod add_vectors;
pub mod layer_norm;
pub mod matmul;
pub mod row_gather;
pub mod softmax;

use crate::dsl::{Bindings, DType, Error, Kernel, Result, Role};

/// One kernel specialised to one problem: its IR and the values of its symbolic extents.
#[derive(Clone, Debug)]
pub struct Instance {
    pub kernel: Kernel,
    pub bindings: Bindings,
}

impl Instance {
    /// The dtype and shape of each array `launch` takes for this instance: the prefetch
    /// operands, then the inputs.
    pub fn arguments(&self) -> Vec<(DType, Vec<usize>)> {
        self.kernel
            .operands
            .iter()
            .filter(|o| matches!(o.role, Role::Prefetch | Role::Input))
            .map(|o| {
                let shape = o
                    .shape
                    .iter()
                    .map(|d| d.resolve(&self.bindings).expect("bound by the instance"))
                    .collect();
                (o.dtype, shape)
            })
            .collect()
    }
}

/// A shipped kernel and how to instantiate it for a shape and a dtype.
pub struct Entry {
    pub name: &'static str,
    pub about: &'static str,
    /// The meaning of each extent of the problem shape, e.g. `["m", "n"]`.
    pub shape: &'static [&'static str],
    pub dtypes: &'static [DType],
    pub instance: fn(&[usize], DType) -> Result<Instance>,
}

impl Entry {
    /// The kernel for `shape` (one extent per [`Entry::shape`] name) and `dtype`.
    pub fn instantiate(&self, shape: &[usize], dtype: DType) -> Result<Instance> {
        if shape.len() != self.shape.len() {
            return Err(Error::new(format!(
                "{} takes a shape {} ({} extents), got {} extents",
                self.name,
                self.shape.join("x"),
                self.shape.len(),
                shape.len()
            )));
        }
        if !self.dtypes.contains(&dtype) {
            return Err(Error::new(format!("{} has no {dtype} variant", self.name)));
        }
        (self.instance)(shape, dtype)
    }
}

const FLOATS: &[DType] = &[DType::F32, DType::BF16];

pub const CATALOG: &[Entry] = &[
    Entry {
        name: "add_vectors",
        about: "o = x + y over 1-D blocks of 1024",
        shape: &["n"],
        dtypes: FLOATS,
        instance: add_vectors::instance,
    },
    Entry {
        name: "softmax",
        about: "row softmax over blocks of 8 rows",
        shape: &["m", "n"],
        dtypes: FLOATS,
        instance: softmax::instance,
    },
    Entry {
        name: "layer_norm",
        about: "row layer norm computed in f32, f32 weight and bias",
        shape: &["m", "n"],
        dtypes: FLOATS,
        instance: layer_norm::instance,
    },
    Entry {
        name: "matmul",
        about: "blocked matmul, f32 scratch accumulator over an arbitrary k axis",
        shape: &["m", "k", "n"],
        dtypes: FLOATS,
        instance: matmul::instance,
    },
    Entry {
        name: "row_gather",
        about: "o[i, :] = table[idx[i], :] with a scalar-prefetch index map",
        shape: &["rows", "d", "k"],
        dtypes: FLOATS,
        instance: row_gather::instance,
    },
];

/// The catalog entry called `name`.
pub fn find(name: &str) -> Option<&'static Entry> {
    CATALOG.iter().find(|e| e.name == name)
}

/// `[(name, extent)]` as bindings.
fn bind(pairs: &[(&str, usize)]) -> Bindings {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}
