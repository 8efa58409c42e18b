use tpukit::prelude::*;

#[tpu_kernel]
fn k(x: In, o: Out) {
    let v = x[..];
    v = v * 2.0;
    o[..] = v;
}

fn main() {}
