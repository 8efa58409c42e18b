//! The structural hash keys caches across processes and machines, so it must be pinned.

mod common;

use tpukit_dsl::{DType, Loc};

#[test]
fn hash_is_pinned_across_processes() {
    // A constant, not a value computed in this process: a change here means every cache key
    // changes, which must be a deliberate decision (bump it with the printer format).
    assert_eq!(
        common::add(DType::F32).structural_hash().to_string(),
        include_str!("snapshots/add_f32.hash").trim()
    );
}

#[test]
fn hash_ignores_locations_but_not_structure() {
    let a = common::add(DType::F32);
    let mut moved = a.clone();
    for op in &mut moved.body.body.ops {
        op.loc = Some(Loc::new("elsewhere.rs", 99, 1));
    }
    assert_eq!(a.structural_hash(), moved.structural_hash());
    assert_ne!(
        a.structural_hash(),
        common::add(DType::BF16).structural_hash()
    );
    let mut renamed = a.clone();
    renamed.name = "add2".into();
    assert_ne!(a.structural_hash(), renamed.structural_hash());
}
