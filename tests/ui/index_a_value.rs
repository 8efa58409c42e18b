use tpukit::prelude::*;

#[tpu_kernel]
fn k(x: In, o: Out) {
    let v = x[..];
    o[..] = v[0];
}

fn main() {}
