//! tpuBLAS operators beyond the pointwise ones, each against an f64 reference written as
//! plain loops, on random shapes that do not divide the blocks, ranks 1–4 where the operator
//! allows, f32 and bf16; every operator's kernel on the interpreter against the compiled CPU
//! backend; and argument errors that name the operator.

mod common;
mod declared;
mod devices;
mod errors;
mod gathers;
mod products;
mod rows;
