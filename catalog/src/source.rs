//! Sources of named kernels: the catalog, tpuBLAS, any library of kernels that tools list,
//! lower and precompile through one interface ([`KernelSource`]).

use crate::dsl::{Bindings, DType, Kernel, Result, Role};

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

/// What a listing shows of one entry of a source.
#[derive(Clone, Debug, PartialEq)]
pub struct Listing {
    pub name: String,
    pub about: &'static str,
    /// The meaning of each extent of the entry's problem shape, e.g. `["m", "n"]`.
    pub shape: &'static [&'static str],
    pub dtypes: &'static [DType],
}

/// One kernel a source ships, under the id that finds it again ([`KernelSource::kernel`]),
/// with the bindings its TPU module is lowered at in a bundle.
#[derive(Clone, Debug)]
pub struct Shipped {
    pub id: String,
    pub instance: Instance,
}

/// A library of named kernels: what `tpukit list` lists, `tpukit lower` lowers and `tpukit
/// bundle build` precompiles, the same way for every library.
///
/// Entries are problems (`softmax` of an `m x n` array), instantiated for a shape and a
/// dtype; shipped kernels are the distinct kernels the entries launch (one entry may launch
/// several, several may share one), each under an id.
pub trait KernelSource {
    /// The source's name, heading its part of a listing (`catalog`, `tpublas`).
    fn name(&self) -> &'static str;

    /// Every entry, in listing order.
    fn entries(&self) -> Vec<Listing>;

    /// The entry `name` for a problem `shape` (one extent per name of its listing's shape)
    /// and `dtype`, or `None` if the source has no entry of that name.
    fn instantiate(&self, name: &str, shape: &[usize], dtype: DType) -> Option<Result<Instance>>;

    /// Every distinct kernel the source ships for `dtype`, in a stable order: what bundles
    /// precompile and the conformance suite compiles.
    fn kernels(&self, dtype: DType) -> Result<Vec<Shipped>>;

    /// The shipped kernel `id` for `dtype`, or `None` if the source has no kernel of that id.
    fn kernel(&self, id: &str, dtype: DType) -> Option<Result<Shipped>>;
}
