//! What the runtime's integration tests share.

use rand::{Rng, SeedableRng, rngs::StdRng};
use tpukit_dsl::*;
use tpukit_runtime::HostArray;

/// An array of `dtype` and `shape` of values uniform in [-4, 4) drawn from `seed`.
#[allow(dead_code)] // not every test uses it
pub fn random(dtype: DType, shape: &[usize], seed: u64) -> HostArray {
    let mut rng = StdRng::seed_from_u64(seed);
    let v: Vec<f64> = (0..shape.iter().product::<usize>())
        .map(|_| rng.random_range(-4.0..4.0))
        .collect();
    HostArray::from_f64(dtype, shape, &v)
}

/// The call spec of an elementwise kernel over f32 rows `[m, 128]` in (8, 128) blocks, one
/// input and one output, grid `(cdiv(m, 8),)`.
#[allow(dead_code)] // not every test uses it
pub fn rows_spec() -> CallSpec {
    let rows = || {
        ArraySpec::new(DType::F32, [Dim::sym("m"), Dim::Static(128)])
            .blocked([8, 128], [grid(0), 0.into()])
    };
    CallSpec {
        grid: vec![GridAxis::parallel(Extent::cdiv("m", 8))],
        inputs: vec![rows()],
        outputs: vec![rows()],
        ..Default::default()
    }
}
