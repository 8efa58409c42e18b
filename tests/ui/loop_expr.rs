use tpukit::prelude::*;

#[tpu_kernel]
fn k(x: In, o: Out) {
    loop {
        o[..] = x[..];
    }
}

fn main() {}
