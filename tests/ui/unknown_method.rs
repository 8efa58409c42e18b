use tpukit::prelude::*;

#[tpu_kernel]
fn k(x: In, o: Out) {
    o[..] = x[..].softplus();
}

fn main() {}
