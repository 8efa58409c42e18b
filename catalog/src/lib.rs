//! The kernels tpukit ships. Each file holds one `#[tpu_kernel]` and the call spec it is
//! launched with; [`CATALOG`] lists them, [`Catalog`] presents them to tools (`tpukit list`,
//! `tpukit lower`, bundles) as a [`KernelSource`], and the examples run them.
//!
//! The crate depends only on the DSL and the macro, so every backend's tests can use the
//! real kernels without linking the others.

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
pub mod flash_attention;
pub mod layer_norm;
pub mod matmul;
pub mod op_kernels;
pub mod row_gather;
pub mod softmax;

mod source;

pub use source::{Instance, KernelSource, Listing, Shipped};

use crate::dsl::{Bindings, DType, Error, ErrorKind, Result};

/// A shipped kernel and how to instantiate it for a shape and a dtype.
pub struct Entry {
    pub name: &'static str,
    pub about: &'static str,
    /// The meaning of each extent of the problem shape, e.g. `["m", "n"]`.
    pub shape: &'static [&'static str],
    pub dtypes: &'static [DType],
    /// The problem shape the kernel ships at (what bundles precompile). Only the extents the
    /// kernel bakes in statically (softmax's row length, say) matter: symbolic extents are
    /// bound at launch, so the shipped kernel serves every value of them.
    pub shipped: &'static [usize],
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
            ))
            .with_kind(ErrorKind::Shape));
        }
        if !self.dtypes.contains(&dtype) {
            return Err(Error::new(format!("{} has no {dtype} variant", self.name))
                .with_kind(ErrorKind::DType));
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
        shipped: &[1 << 20],
        instance: add_vectors::instance,
    },
    Entry {
        name: "softmax",
        about: "row softmax over blocks of 8 rows",
        shape: &["m", "n"],
        dtypes: FLOATS,
        shipped: &[4096, 1024],
        instance: softmax::instance,
    },
    Entry {
        name: "layer_norm",
        about: "row layer norm computed in f32, f32 weight and bias",
        shape: &["m", "n"],
        dtypes: FLOATS,
        shipped: &[4096, 1024],
        instance: layer_norm::instance,
    },
    Entry {
        name: "matmul",
        about: "blocked matmul, f32 scratch accumulator over an arbitrary k axis",
        shape: &["m", "k", "n"],
        dtypes: FLOATS,
        shipped: &[1024, 1024, 1024],
        instance: matmul::instance,
    },
    Entry {
        name: "row_gather",
        about: "o[i, :] = table[idx[i], :] with a scalar-prefetch index map",
        shape: &["rows", "d", "k"],
        dtypes: FLOATS,
        shipped: &[1000, 256, 64],
        instance: row_gather::instance,
    },
    Entry {
        name: "flash_attention",
        about: "causal flash attention forward: online softmax over key blocks, skipping masked ones",
        shape: &["bh", "l", "s", "d"],
        dtypes: FLOATS,
        shipped: &[8, 512, 512, 128],
        instance: flash_attention::instance,
    },
];

/// The catalog entry called `name`.
pub fn find(name: &str) -> Option<&'static Entry> {
    CATALOG.iter().find(|e| e.name == name)
}

/// The catalog as a [`KernelSource`]: each entry ships one kernel, at [`Entry::shipped`],
/// under the entry's name.
pub struct Catalog;

impl Catalog {
    fn ship(entry: &Entry, dtype: DType) -> Result<Shipped> {
        Ok(Shipped {
            id: entry.name.to_string(),
            instance: entry.instantiate(entry.shipped, dtype)?,
        })
    }
}

impl KernelSource for Catalog {
    fn name(&self) -> &'static str {
        "catalog"
    }

    fn entries(&self) -> Vec<Listing> {
        CATALOG
            .iter()
            .map(|e| Listing {
                name: e.name.to_string(),
                about: e.about,
                shape: e.shape,
                dtypes: e.dtypes,
            })
            .collect()
    }

    fn instantiate(&self, name: &str, shape: &[usize], dtype: DType) -> Option<Result<Instance>> {
        find(name).map(|e| e.instantiate(shape, dtype))
    }

    fn kernels(&self, dtype: DType) -> Result<Vec<Shipped>> {
        CATALOG
            .iter()
            .filter(|e| e.dtypes.contains(&dtype))
            .map(|e| Catalog::ship(e, dtype))
            .collect()
    }

    fn kernel(&self, id: &str, dtype: DType) -> Option<Result<Shipped>> {
        find(id).map(|e| Catalog::ship(e, dtype))
    }
}

/// `[(name, extent)]` as bindings.
fn bind(pairs: &[(&str, usize)]) -> Bindings {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dsl::Role;

    #[test]
    fn every_entry_ships_one_kernel_found_again_by_its_name() {
        assert_eq!(Catalog.entries().len(), CATALOG.len());
        for dtype in [DType::F32, DType::BF16] {
            let shipped = Catalog.kernels(dtype).unwrap();
            assert_eq!(shipped.len(), CATALOG.len());
            for k in shipped {
                let again = Catalog.kernel(&k.id, dtype).expect("an id").unwrap();
                assert_eq!(again.instance.kernel, k.instance.kernel);
                let kernel = &k.instance.kernel;
                let (_, out) = kernel.operands_with_role(Role::Output).next().unwrap();
                assert_eq!(out.dtype, dtype, "{}", k.id);
            }
        }
        assert!(Catalog.kernels(DType::I32).unwrap().is_empty());
        assert!(Catalog.kernel("aten.neg.default#0", DType::F32).is_none());
    }

    #[test]
    fn a_wrong_problem_is_an_error_of_its_kind() {
        let shape = Catalog.instantiate("softmax", &[8], DType::F32).unwrap();
        assert_eq!(shape.unwrap_err().kind, ErrorKind::Shape);
        let dtype = Catalog
            .instantiate("softmax", &[8, 128], DType::I32)
            .unwrap();
        assert_eq!(dtype.unwrap_err().kind, ErrorKind::DType);
        assert!(Catalog.instantiate("nope", &[8], DType::F32).is_none());
    }
}
