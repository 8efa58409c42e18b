//! What the runtime's integration tests share.

use tpukit_dsl::*;

/// The call spec of an elementwise kernel over f32 rows `[m, 128]` in (8, 128) blocks, one
/// input and one output, grid `(cdiv(m, 8),)`.
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
