//! Host arrays over memory someone else owns (`HostArray::borrowed`): read in place by
//! launches and reshapes, copied before anything writes them, equal to the owned array of
//! the same elements, and holding their owner exactly as long as some array refers to it.

use std::sync::Arc;
use tpukit_dsl::{DType, parse_kernel};
use tpukit_runtime::{Device, HostArray, launch};

/// `2·x` over `n` elements in blocks of 128 (an edge block overhangs `n = 1000`).
const DOUBLE: &str = "kernel @double grid(parallel cdiv(n, 128)) {
  input %x: f32[n] block[128] fill 0.0 map(%0) {
    yield %0
  }
  output %o: f32[n] block[128] fill 0.0 map(%0) {
    yield %0
  }
body {
  %0 = load %x[ds(0, 128)] : f32[128]
  %1 = add %0, %0 : f32[128]
  store %o[ds(0, 128)], %1
  yield
}
";

fn values(n: usize) -> Arc<Vec<f32>> {
    Arc::new((0..n).map(|i| (i as f32 * 0.37).sin()).collect())
}

fn borrow(owner: &Arc<Vec<f32>>, shape: &[usize]) -> HostArray {
    let data = owner.as_ptr() as *const u8;
    // SAFETY: `owner` holds `product(shape)` f32s, aligned, never written while borrowed.
    unsafe { HostArray::borrowed(DType::F32, shape, data, owner.clone()) }
}

#[test]
fn reshapes_and_clones_read_the_same_memory() {
    let owner = values(24);
    let a = borrow(&owner, &[4, 6]);
    let b = a.clone().reshape(&[2, 12]).unwrap();
    assert!(b.is_borrowed());
    assert_eq!(b.shape(), &[2, 12]);
    assert_eq!(b.data_ptr(), owner.as_ptr() as *const u8);
    assert_eq!(a, HostArray::from_f64(DType::F32, &[4, 6], &a.to_f64_vec()));
    let owned = a.owned().into_owned();
    assert!(!owned.is_borrowed() && owned == a);
    assert_eq!(a.permuted(&[1, 0]), owned.permuted(&[1, 0]));
    assert_eq!(a.permuted(&[1, 0]).shape(), &[6, 4]);
}

#[test]
fn writing_copies_first_and_leaves_the_owner_untouched() {
    let owner = values(24);
    let before = owner.as_ref().clone();
    let mut a = borrow(&owner, &[24]);
    let p = a.data_ptr_mut();
    assert!(!a.is_borrowed());
    assert_ne!(p as *const u8, owner.as_ptr() as *const u8);
    // SAFETY: `p` addresses the 24 f32s of `a`'s own storage.
    unsafe { std::ptr::write_bytes(p, 0, 24 * 4) };
    assert_eq!(*owner, before);
    assert_eq!(a.to_f64_vec(), vec![0.0; 24]);
}

#[test]
fn the_owner_lives_as_long_as_an_array_refers_to_it() {
    let owner = values(8);
    let a = borrow(&owner, &[8]);
    let b = a.clone().reshape(&[2, 4]).unwrap();
    assert_eq!(Arc::strong_count(&owner), 3);
    drop(a);
    assert_eq!(Arc::strong_count(&owner), 2);
    drop(b);
    assert_eq!(Arc::strong_count(&owner), 1);
}

#[test]
fn launches_read_borrowed_inputs_in_place() {
    let kernel = parse_kernel(DOUBLE).unwrap();
    let owner = values(1000);
    let before = owner.as_ref().clone();
    let x = borrow(&owner, &[1000]);
    let want: Vec<f64> = before.iter().map(|&v| 2.0 * v as f64).collect();
    for device in [Device::Cpu, Device::Interpret] {
        let out = launch(&kernel, device, &[&x]).unwrap().remove(0);
        assert!(!out.is_borrowed());
        assert_ne!(out.data_ptr(), owner.as_ptr() as *const u8);
        assert_eq!(out.to_f64_vec(), want, "{device}");
    }
    assert_eq!(*owner, before);
}
