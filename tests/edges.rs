//! Property tests of the edge-block semantics on random shapes that mostly do not divide the
//! block: loads outside the array read the fill value, stores outside it are dropped, and one
//! kernel serves every binding of its symbols.

mod common;

use common::*;
use proptest::prelude::*;
use tpukit::prelude::*;

#[tpu_kernel]
fn shift_and_count(x: In, o: Out, pad: Out) {
    let v = x[..];
    o[..] = v * 2.0 + 1.0;
    // Counts, per block row, how many elements read the fill value (-7).
    pad[..] = (v == -7.0).cast(f32).sum_keepdims(1).broadcast_to([4, 32]);
}

fn check(device: Device, m: usize, n: usize, bm: usize, bn: usize) {
    let spec = CallSpec {
        grid: grid2(bm, bn),
        inputs: vec![tiles(DType::F32, bm, bn).fill(-7.0)],
        outputs: vec![tiles(DType::F32, bm, bn), tiles(DType::F32, bm, bn)],
        ..Default::default()
    };
    let k = shift_and_count(&spec).unwrap();
    let (x, xv) = random(
        &mut rng((m * 1000 + n) as u64),
        DType::F32,
        &[m, n],
        0.0,
        1.0,
    );
    let mut outs = vec![
        HostArray::from_f64(DType::F32, &[m, n], &vec![42.0; m * n]),
        HostArray::zeros(DType::F32, &[m, n]),
    ];
    launch_into(&k, device, &[&x], &mut outs).unwrap();
    let want: Vec<f64> = xv
        .iter()
        .map(|v| DType::F32.round_f64(v * 2.0 + 1.0))
        .collect();
    assert_close("in-bounds elements", &outs[0].to_f64_vec(), &want, 0.0);
    let pad = outs[1].to_f64_vec();
    for i in 0..m {
        for j in 0..n {
            let block_end = (j / bn + 1) * bn;
            // A row of the block reads fill exactly where its columns overhang the array.
            let outside = block_end.saturating_sub(n);
            assert_eq!(
                pad[i * n + j],
                outside as f64,
                "fill count at ({i}, {j}) for {m}x{n}"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn edge_blocks_read_fill_and_drop_stores(m in 1usize..30, n in 1usize..100) {
        check(Device::Interpret, m, n, 4, 32);
    }

    #[test]
    fn cpu_edge_blocks_read_fill_and_drop_stores(m in 1usize..30, n in 1usize..100) {
        check(Device::Cpu, m, n, 4, 32);
    }
}
