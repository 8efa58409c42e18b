use tpukit::prelude::*;

#[tpu_kernel]
fn k(x: In, o: Out) {
    o[..] = x + 1.0;
}

fn main() {}
