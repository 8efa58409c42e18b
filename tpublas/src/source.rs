//! tpuBLAS as a [`KernelSource`]: its entries are the operators, its shipped kernels every
//! distinct kernel they launch ([`kernel_ids`]), under the id `OP#I` (kernel `I` of
//! [`Op::kernels`]).

use crate::promote::served;
use crate::{BlasError, Op, find, kernel_ids, ops};
use tpukit::Launchable as _;
use tpukit::catalog::{Instance, KernelSource, Listing, Shipped};
use tpukit::dsl::{DType, Fit, Kernel, Result};

/// The operators tpuBLAS implements, as one source of kernels.
pub struct TpuBlas;

const SERVED: &[DType] = &[DType::F32, DType::BF16];

/// A kernel shipped under `id`: its TPU module is lowered at sample extents its blocks
/// divide (a TPU kernel is specialised to shapes; its CPU code serves every shape).
fn shipped(id: String, kernel: &Kernel) -> Shipped {
    let kernel = kernel.clone();
    Shipped {
        id,
        instance: Instance {
            bindings: kernel.sample_bindings(Fit::Divisible),
            kernel,
        },
    }
}

impl KernelSource for TpuBlas {
    fn name(&self) -> &'static str {
        "tpublas"
    }

    fn entries(&self) -> Vec<Listing> {
        ops()
            .iter()
            .map(|op| Listing {
                name: op.name(),
                about: op.about,
                shape: op.shape(),
                dtypes: SERVED,
            })
            .collect()
    }

    fn instantiate(&self, name: &str, shape: &[usize], dtype: DType) -> Option<Result<Instance>> {
        find(name).map(|op| op.instantiate(shape, dtype))
    }

    fn kernels(&self, dtype: DType) -> Result<Vec<Shipped>> {
        if !served(dtype) {
            return Ok(Vec::new());
        }
        Ok(kernel_ids(dtype)?
            .into_iter()
            .map(|(id, k)| shipped(id, k.kernel()))
            .collect())
    }

    fn kernel(&self, id: &str, dtype: DType) -> Option<Result<Shipped>> {
        let (name, i) = id.split_once('#')?;
        let op = find(name)?;
        Some(nth_kernel(op, i, dtype).map(|k| shipped(id.to_string(), &k)))
    }
}

/// Kernel `i` (a number, as text) of `op`'s kernels for `dtype`.
fn nth_kernel(op: &Op, i: &str, dtype: DType) -> Result<Kernel> {
    let kernels = op.kernels(dtype)?;
    let n = kernels.len();
    i.parse::<usize>()
        .ok()
        .and_then(|i| kernels.get(i))
        .map(|k| k.kernel().clone())
        .ok_or_else(|| {
            BlasError::new(
                &op.name(),
                format!("has {n} kernels for {dtype} (#0 is the first), not `#{i}`"),
            )
            .into()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_kernel_is_found_again_by_its_id() {
        for dtype in SERVED.iter().copied() {
            let shipped = TpuBlas.kernels(dtype).unwrap();
            assert_eq!(shipped.len(), kernel_ids(dtype).unwrap().len());
            for k in &shipped {
                let again = TpuBlas.kernel(&k.id, dtype).expect("an id").unwrap();
                let hash = |s: &Shipped| s.instance.kernel.structural_hash();
                assert_eq!(hash(&again), hash(k), "{}", k.id);
                assert_eq!(again.instance.bindings, k.instance.bindings);
            }
        }
        assert!(TpuBlas.kernels(DType::F16).unwrap().is_empty());
        assert!(TpuBlas.kernel("softmax", DType::F32).is_none());
        assert!(TpuBlas.kernel("aten.nope#0", DType::F32).is_none());
        let e = TpuBlas.kernel("aten.neg.default#x", DType::F32).unwrap();
        assert!(e.unwrap_err().message.contains("not `#x`"));
    }

    #[test]
    fn entries_are_the_operators() {
        let entries = TpuBlas.entries();
        assert_eq!(entries.len(), ops().len());
        let add = entries
            .iter()
            .find(|e| e.name == "aten.add.Tensor")
            .unwrap();
        assert_eq!(add.shape, ["n"]);
        let i = TpuBlas
            .instantiate("add.Tensor", &[4096], DType::BF16)
            .unwrap();
        assert_eq!(i.unwrap().bindings["n"], 4096);
        assert!(
            TpuBlas
                .instantiate("softmax", &[8, 8], DType::F32)
                .is_none()
        );
    }
}
