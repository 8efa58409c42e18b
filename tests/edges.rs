//! Property tests on random shapes that mostly do not divide the block: loads outside the array
//! read the fill value, stores outside it never reach the array (an output keeps them while its
//! window stays at its block), one kernel serves every binding of its
//! symbols, and the compiled `cpu` device agrees with the interpreter on every catalog kernel.

mod common;

use common::*;
use proptest::prelude::*;
use tpukit::catalog::{CATALOG, Entry};
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

/// Accumulates the `k` blocks of each row block of `x` in the output block (which every `k`
/// step revisits), overhang included, and on the last step writes each row's total over the
/// whole block into every column.
#[tpu_kernel]
fn edge_accumulator(x: In, o: Out) {
    if program_id(1) == 0 {
        o[..] = x[..];
    } else {
        o[..] = o[..] + x[..];
    }
    if program_id(1) == num_programs(1) - 1 {
        o[..] = o[..].sum_keepdims(1).broadcast_to([4, 32]);
    }
}

/// An output's part past the array's end is memory while its window stays at one block: a
/// value stored there is read back at the next grid step (the output is `n` < 32 wide, its
/// block 32), as a TPU's VMEM block buffer keeps it.
fn check_edge_memory(device: Device, m: usize, n: usize, steps: usize) {
    let spec = CallSpec {
        grid: vec![
            GridAxis::parallel(Extent::cdiv("m", 4)),
            GridAxis::arbitrary(steps),
        ],
        inputs: vec![
            ArraySpec::new(DType::F32, ["m".into(), Dim::Static(steps * 32)])
                .blocked([4, 32], [grid(0), grid(1)]),
        ],
        outputs: vec![ArraySpec::new(DType::F32, ["m", "n"]).blocked([4, 32], [grid(0), 0.into()])],
        ..Default::default()
    };
    let k = edge_accumulator(&spec).unwrap();
    let (x, xv) = random(
        &mut rng((m * 100 + n) as u64),
        DType::F32,
        &[m, steps * 32],
        -1.0,
        1.0,
    );
    let mut outs = vec![HostArray::zeros(DType::F32, &[m, n])];
    launch_into(&k, device, &[&x], &mut outs).unwrap();
    let rows: Vec<f64> = (0..m)
        .map(|i| xv[i * steps * 32..(i + 1) * steps * 32].iter().sum())
        .collect();
    let want: Vec<f64> = (0..m * n).map(|e| rows[e / n]).collect();
    assert_close("row totals", &outs[0].to_f64_vec(), &want, 1e-5);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(8))]
    #[test]
    fn output_edges_keep_their_stores_while_the_window_stays(
        m in 1usize..13, n in 1usize..32, steps in 1usize..4,
    ) {
        check_edge_memory(Device::Interpret, m, n, steps);
        check_edge_memory(Device::Cpu, m, n, steps);
    }
}

/// Runs a catalog kernel on random inputs of `shape` on both devices and compares them.
fn agree(entry: &Entry, shape: &[usize], dtype: DType, seed: u64) {
    let inst = entry.instantiate(shape, dtype).unwrap();
    let k = &inst.kernel;
    let mut r = rng(seed);
    let inputs: Vec<HostArray> = inst
        .arguments()
        .into_iter()
        .map(|(dtype, dims)| {
            // Integer operands are indices (row_gather): keep them inside every test shape.
            let (lo, hi) = if dtype.is_float() {
                (-2.0, 2.0)
            } else {
                (0.0, 8.0)
            };
            random(&mut r, dtype, &dims, lo, hi).0
        })
        .collect();
    let refs: Vec<&HostArray> = inputs.iter().collect();
    let want = launch(k, Device::Interpret, &refs).unwrap();
    let got = launch(k, Device::Cpu, &refs).unwrap();
    for (g, w) in got.iter().zip(&want) {
        // Reductions and dots may sum in another order; bf16 results may differ by one
        // rounding of an intermediate.
        let rel = if w.dtype() == DType::F32 {
            1e-4
        } else {
            2.0 * tol(w.dtype())
        };
        let what = format!("{} {dtype} {shape:?}: cpu vs interpret", entry.name);
        assert_close(&what, &g.to_f64_vec(), &w.to_f64_vec(), rel);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]
    #[test]
    fn cpu_agrees_with_the_interpreter_on_every_catalog_kernel(
        extents in proptest::collection::vec(9usize..200, 4),
        bf16 in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let dtype = if bf16 { DType::BF16 } else { DType::F32 };
        for entry in CATALOG {
            let mut shape = extents[..entry.shape.len()].to_vec();
            if entry.name == "flash_attention" {
                // [bh, l, s, d]: the interpreter runs every 128×128×d product of every
                // step; one or two batch-heads and a head dimension below 64 keep it short.
                shape[0] = 1 + shape[0] % 2;
                shape[3] = 8 + shape[3] % 56;
            }
            agree(entry, &shape, dtype, seed);
        }
    }
}
