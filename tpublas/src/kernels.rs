//! Every tpuBLAS kernel, instantiated for a representative problem: what `tpukit list`
//! shows, `tpukit lower` lowers, the conformance suite compiles with libtpu, and
//! `tpukit bundle build` precompiles. Shapes here are deliberately not multiples of the
//! blocks; symbolic extents make each kernel serve every other shape too.

use crate::BlasError;
use crate::backward::{gelu_backward_kernel, softmax_backward_kernel, threshold_backward_kernel};
use crate::copies::{cumsum_kernel, transpose_kernel};
use crate::elementwise::{Binary, Unary, binary_kernel, clamp_kernel, scalar_kernel, where_kernel};
use crate::matmul::bmm_kernel;
use crate::rows::{Reduction, layer_norm_kernel, reduce_kernel, rms_norm_kernel, softmax_kernel};
use tpukit::dsl::{Bindings, DType, Kernel};

/// A kernel and values for its symbols.
pub struct OpKernel {
    /// `tpublas.<op>[.<variant>]`
    pub name: String,
    pub kernel: Kernel,
    pub bindings: Bindings,
}

fn bind(pairs: &[(&str, usize)]) -> Bindings {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

/// The row length the row-wise kernels are listed with.
pub const ROW: usize = 384;

/// Every tpuBLAS kernel for `dtype`.
pub fn kernels(dtype: DType) -> Result<Vec<OpKernel>, BlasError> {
    let flat = bind(&[("n", 100_003)]);
    let rows = bind(&[("rows", 1003)]);
    let mut out = Vec::new();
    let mut push = |name: String, kernel: Kernel, bindings: &Bindings| {
        out.push(OpKernel {
            name,
            kernel,
            bindings: bindings.clone(),
        })
    };
    for u in Unary::ALL {
        push(
            format!("tpublas.{u:?}").to_lowercase(),
            u.kernel(dtype)?,
            &flat,
        );
    }
    for b in Binary::ALL {
        let name = format!("{b:?}").to_lowercase();
        push(
            format!("tpublas.{name}.tensor"),
            binary_kernel(b, dtype, 1.0)?,
            &flat,
        );
        if b.aten_scalar().is_some() {
            push(
                format!("tpublas.{name}.scalar"),
                scalar_kernel(b, dtype, 1.0)?,
                &flat,
            );
        }
    }
    push("tpublas.where".into(), where_kernel(dtype)?, &flat);
    push("tpublas.clamp".into(), clamp_kernel(dtype)?, &flat);
    push(
        "tpublas.softmax".into(),
        softmax_kernel(false, dtype, ROW)?,
        &rows,
    );
    push(
        "tpublas.log_softmax".into(),
        softmax_kernel(true, dtype, ROW)?,
        &rows,
    );
    push(
        "tpublas.layer_norm".into(),
        layer_norm_kernel(dtype, ROW, 1e-5, DType::F32, DType::F32)?,
        &rows,
    );
    push(
        "tpublas.rms_norm".into(),
        rms_norm_kernel(dtype, ROW, 1e-6, DType::F32)?,
        &rows,
    );
    for r in [Reduction::Sum, Reduction::Mean, Reduction::Amax] {
        push(
            format!("tpublas.{r:?}").to_lowercase(),
            reduce_kernel(r, dtype, ROW)?,
            &rows,
        );
    }
    push(
        "tpublas.transpose".into(),
        transpose_kernel(dtype)?,
        &bind(&[("m", 300), ("n", 260)]),
    );
    push("tpublas.cumsum".into(), cumsum_kernel(dtype, ROW)?, &rows);
    push(
        "tpublas.threshold_backward".into(),
        threshold_backward_kernel(dtype)?,
        &flat,
    );
    push(
        "tpublas.gelu_backward".into(),
        gelu_backward_kernel(dtype, false)?,
        &flat,
    );
    push(
        "tpublas.gelu_tanh_backward".into(),
        gelu_backward_kernel(dtype, true)?,
        &flat,
    );
    push(
        "tpublas.softmax_backward".into(),
        softmax_backward_kernel(dtype, ROW)?,
        &rows,
    );
    push(
        "tpublas.bmm".into(),
        bmm_kernel(dtype)?,
        &bind(&[("b", 2), ("m", 300), ("k", 200), ("n", 260)]),
    );
    Ok(out)
}
