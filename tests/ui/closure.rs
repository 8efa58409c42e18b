use tpukit::prelude::*;

#[tpu_kernel]
fn k(x: In, o: Out) {
    let f = |v| v;
    o[..] = x[..];
}

fn main() {}
