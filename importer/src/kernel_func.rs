//! The Mosaic kernel function's signature and attributes back to a [`CallSpec`]: grid and
//! dimension semantics, scalar prefetch, windowed inputs and outputs, scratch.
//!
//! Mosaic's kernel signature is `(grid indices…, prefetch refs…, input and output windows…,
//! scratch refs…)`. It does not say which windows are inputs: the custom call does (its
//! operands are the prefetch arrays then the inputs, its results the outputs), so the caller
//! passes the call's global types. Blocks come from `window_params` (`window_bounds` and a
//! `transform_indices` function); an operand without `window_bounds` is whole.

use super::element_window;
use super::index_map::index_map;
use super::memory_space::MemorySpace;
use super::scope::attr;
use super::text::{self, Ty};
use super::vmem::{self, Allocation};
use melior::ir::{
    BlockLike, RegionLike, ValueLike,
    operation::{OperationLike, OperationRef},
};
use std::collections::HashMap;
use tpukit_dsl::{
    ArraySpec, BlockDim, Blocking, CallSpec, Error, Extent, GridAxis, Result, Role, Semantics, Type,
};

/// The call spec of a kernel function, and the role of each of its memref arguments.
pub struct Signature {
    pub spec: CallSpec,
    /// How many leading prefetch operands of `spec` are dynamic grid extents, which are not
    /// kernel arguments in Mosaic.
    pub n_values: usize,
    /// The kernel's arguments after the grid indices, in order, with their roles.
    pub roles: Vec<Role>,
}

/// Reads the kernel function `kernel` (with the module's other functions `funcs`, by name),
/// given the custom call's operand and result types; its windows and VMEM scratch must fit
/// `vmem_limit` (the call's `vmem_limit_bytes`) or, without one, a TPU's VMEM.
pub fn signature(
    kernel: &OperationRef<'_, '_>,
    funcs: &HashMap<String, OperationRef<'_, '_>>,
    operands: &[Type],
    results: &[Type],
    vmem_limit: Option<usize>,
) -> Result<Signature> {
    let bounds = match kernel.attribute("iteration_bounds") {
        Ok(a) => text::int_array(&a.to_string())?,
        Err(_) => vec![],
    };
    let semantics = semantics(&attr(kernel, "dimension_semantics")?, bounds.len())?;
    // A negative bound is Mosaic's dynamic size: the extent is the value of the custom call's
    // next leading operand (one i32: 0-d, or `[1]`), imported as a grid-value prefetch operand.
    let mut n_values = 0;
    let grid: Vec<GridAxis> = bounds
        .iter()
        .zip(&semantics)
        .map(|(&n, &s)| {
            let extent = if n < 0 {
                n_values += 1;
                Extent::Value {
                    operand: n_values - 1,
                }
            } else {
                Extent::Static(n as usize)
            };
            GridAxis {
                extent,
                semantics: s,
            }
        })
        .collect();
    if operands.len() < n_values
        || operands[..n_values]
            .iter()
            .any(|t| t.dtype != tpukit_dsl::DType::I32 || t.shape.iter().product::<usize>() != 1)
    {
        return Err(Error::new(format!(
            "the kernel has {n_values} dynamic grid extents but the call's first operands are \
             not as many one-element i32 values"
        )));
    }
    let (value_operands, operands) = operands.split_at(n_values);
    let count = |name: &str| -> Result<usize> {
        let n = text::int(&attr(kernel, name)?)?;
        usize::try_from(n).map_err(|_| Error::new(format!("{name} = {n} is not a count")))
    };
    let (n_prefetch, n_scratch) = (count("scalar_prefetch")?, count("scratch_operands")?);
    let block = kernel
        .region(0)
        .ok()
        .and_then(|r| r.first_block())
        .ok_or_else(|| Error::new("the kernel function has no body"))?;
    let arg_types: Vec<Ty> = (grid.len()..block.argument_count())
        .map(|i| text::ty(&block.argument(i).expect("in range").r#type().to_string()))
        .collect::<Result<_>>()?;
    if operands.len() < n_prefetch {
        return Err(Error::new(format!(
            "the kernel has {n_prefetch} scalar-prefetch operands but the call passes {} arrays",
            operands.len()
        )));
    }
    let n_inputs = operands.len() - n_prefetch;
    let n_windows = n_inputs + results.len();
    let wanted = n_prefetch
        .checked_add(n_windows)
        .and_then(|n| n.checked_add(n_scratch));
    if wanted != Some(arg_types.len()) {
        return Err(Error::new(format!(
            "the kernel takes {} buffers but the call has {} operands, {} results and the \
             kernel {n_scratch} scratch buffers",
            arg_types.len(),
            operands.len(),
            results.len()
        )));
    }
    let windows = window_params(kernel, n_windows)?;
    let modes = pipeline_buffers(kernel, n_windows)?;
    // The axes whose index changes between steps (a traced extent may exceed 1).
    let steps: Vec<bool> = grid
        .iter()
        .map(|a| !matches!(a.extent, Extent::Static(n) if n <= 1))
        .collect();
    let mut vmem = Vec::new();
    let memref = |i: usize| -> Result<(Type, MemorySpace)> {
        match &arg_types[i] {
            Ty::MemRef { ty, space } => Ok((ty.clone(), *space)),
            other => Err(Error::new(format!(
                "kernel argument {i} is not a buffer: {other:?}"
            ))),
        }
    };
    let mut spec = CallSpec {
        grid,
        ..Default::default()
    };
    for t in value_operands {
        spec.prefetch
            .push(ArraySpec::new(tpukit_dsl::DType::I32, t.shape.clone()));
    }
    let mut roles = Vec::new();
    for (i, global) in operands.iter().take(n_prefetch).enumerate() {
        let (ty, _) = memref(i)?;
        check_dtype(&ty, global, "scalar-prefetch operand", i)?;
        spec.prefetch
            .push(ArraySpec::new(global.dtype, global.shape.clone()));
        roles.push(Role::Prefetch);
    }
    for (k, window) in windows.iter().enumerate() {
        let (role, global, what) = if k < n_inputs {
            (Role::Input, &operands[n_prefetch + k], "input")
        } else {
            (Role::Output, &results[k - n_inputs], "output")
        };
        let index = if role == Role::Input { k } else { k - n_inputs };
        let (ty, space) = memref(n_prefetch + k)?;
        if let MemorySpace::Other(name) = space {
            return Err(Error::unsupported(format!(
                "{what} {index} lives in memory space `{name}` (VMEM, SMEM, HBM and \
                 semaphore operands are imported)"
            )));
        }
        let mut array = match space {
            // Semaphores cross the call as their i32 counts (see `tpukit_dsl::dma`).
            MemorySpace::Semaphore(kind) => {
                semaphore_operand(&ty, global, window.is_some(), what, index)?;
                ArraySpec::semaphores(kind, ty.shape.clone())
            }
            _ => {
                check_dtype(&ty, global, what, index)?;
                ArraySpec::new(global.dtype, global.shape.clone())
            }
        };
        if space == MemorySpace::Any {
            array = array.any();
        }
        // A whole operand in SMEM stays there on a TPU (a windowed one is pipelined as VMEM
        // windows are, and imported as one).
        if space == MemorySpace::Smem && window.is_none() {
            array = array.smem();
        }
        // Whether the window's block index changes between steps (a whole array's does not).
        let mut changes = false;
        if let Some((transform, block_shape, element)) = window {
            if block_shape.len() != global.shape.len() {
                return Err(Error::new(format!(
                    "{what} {index}: block {block_shape:?} does not match the array's rank {}",
                    global.shape.len()
                )));
            }
            let f = funcs.get(transform).ok_or_else(|| {
                Error::new(format!("index map `{transform}` is not in the module"))
            })?;
            let map = index_map(f, spec.grid.len(), n_values)?;
            let varies = |axis: usize| steps.get(axis).copied().unwrap_or(true);
            changes = map.iter().any(|e| e.reads_grid(&varies));
            let (block, index_map) = match element {
                Some(low) => element_window::element_dims(block_shape, map, low),
                None => (
                    block_shape.iter().map(|&n| BlockDim::Blocked(n)).collect(),
                    map,
                ),
            };
            array.block = Some(Blocking {
                block,
                index_map,
                fill: None,
            });
        }
        if space == MemorySpace::Vmem {
            vmem.push(Allocation {
                what: format!(
                    "{what} window allocation for operator {what} {}",
                    if role == Role::Input {
                        n_prefetch + k
                    } else {
                        index
                    }
                ),
                dtype: ty.dtype,
                shape: ty.shape.clone(),
                full: Some(global.shape.clone()),
                // A TPU's pipeline fetches a window whose block index no step changes once,
                // into one buffer, and double buffers any other unless the spec says so.
                buffers: modes[k].unwrap_or(if changes { 2 } else { 1 }),
            });
        }
        if role == Role::Input {
            spec.inputs.push(array);
        } else {
            spec.outputs.push(array);
        }
        roles.push(role);
    }
    for i in 0..n_scratch {
        let (ty, space) = memref(n_prefetch + n_windows + i)?;
        spec.scratch.push(scratch(&ty, space)?);
        roles.push(Role::Scratch);
        if space == MemorySpace::Vmem {
            vmem.push(Allocation {
                what: format!("scratch allocation for scratch operand {i}"),
                dtype: ty.dtype,
                shape: ty.shape.clone(),
                full: None,
                buffers: 1,
            });
        }
    }
    vmem::check(&vmem, vmem_limit)?;
    Ok(Signature {
        spec,
        n_values,
        roles,
    })
}

/// A scratch buffer of type `ty` in `space`: VMEM, SMEM (which stays in SMEM on a TPU:
/// `pltpu.SMEM` scratch and `pl.run_scoped` allocations), or semaphores.
pub fn scratch(ty: &Type, space: MemorySpace) -> Result<ArraySpec> {
    match space {
        MemorySpace::Vmem => Ok(ArraySpec::new(ty.dtype, ty.shape.clone())),
        MemorySpace::Smem => Ok(ArraySpec::new(ty.dtype, ty.shape.clone()).smem()),
        MemorySpace::Semaphore(kind) => Ok(ArraySpec::semaphores(kind, ty.shape.clone())),
        MemorySpace::Any | MemorySpace::Other(_) => Err(Error::unsupported(
            "a scratch buffer in HBM (only VMEM, SMEM and semaphore scratch is imported)",
        )),
    }
}

/// Checks a semaphore input or output: whole, and an i32 array of its shape in the call.
fn semaphore_operand(
    ty: &Type,
    global: &Type,
    windowed: bool,
    what: &str,
    index: usize,
) -> Result<()> {
    if windowed || global.dtype != tpukit_dsl::DType::I32 || global.shape != ty.shape {
        return Err(Error::new(format!(
            "{what} {index} is a semaphore array of shape {:?}, but the call passes {} {:?}{}",
            ty.shape,
            global.dtype,
            global.shape,
            if windowed { " with a window" } else { "" }
        )));
    }
    Ok(())
}

fn check_dtype(block: &Type, global: &Type, what: &str, index: usize) -> Result<()> {
    if block.dtype != global.dtype {
        return Err(Error::new(format!(
            "{what} {index} is {} in the call but {} in the kernel",
            global.dtype, block.dtype
        )));
    }
    Ok(())
}

/// `[#tpu.dimension_semantics<parallel>, …]` → one [`Semantics`] per grid axis.
fn semantics(list: &str, rank: usize) -> Result<Vec<Semantics>> {
    let inner = list.trim().trim_start_matches('[').trim_end_matches(']');
    let out: Vec<Semantics> = inner
        .split(", ")
        .filter(|s| !s.trim().is_empty())
        .map(|s| match text::enum_case(s)? {
            "parallel" => Ok(Semantics::Parallel),
            "arbitrary" => Ok(Semantics::Arbitrary),
            other => Err(Error::unsupported(format!("dimension semantics `{other}`"))),
        })
        .collect::<Result<_>>()?;
    if out.len() != rank {
        return Err(Error::new(format!(
            "{} dimension semantics for a grid of rank {rank}",
            out.len()
        )));
    }
    Ok(out)
}

/// Per window: `(transform function name, window bounds, low padding of an element window)`,
/// or `None` for a whole operand.
type WindowParam = Option<(String, Vec<usize>, Option<Vec<i64>>)>;

/// The text inside each `{…}` of `window_params = [{…}, …]` (an empty one for an operand left
/// in HBM), `count` of them; `None` without the attribute.
fn window_entries(kernel: &OperationRef<'_, '_>, count: usize) -> Result<Option<Vec<String>>> {
    let Ok(a) = kernel.attribute("window_params") else {
        return Ok(None);
    };
    let printed = a.to_string();
    let entries: Vec<String> = printed
        .trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .split('}')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(|e| {
            e.trim_start_matches([',', ' '])
                .trim_start_matches('{')
                .to_string()
        })
        .collect();
    if entries.len() != count {
        return Err(Error::new(format!(
            "window_params has {} entries for {count} windowed operands",
            entries.len()
        )));
    }
    Ok(Some(entries))
}

/// Per window, the buffers its `pipeline_mode` asks for (`synchronous`: 1, `double_buffered`:
/// 2), `None` when it names none.
fn pipeline_buffers(kernel: &OperationRef<'_, '_>, count: usize) -> Result<Vec<Option<usize>>> {
    let Some(entries) = window_entries(kernel, count)? else {
        return Ok(vec![None; count]);
    };
    Ok(entries
        .iter()
        .map(|e| {
            if e.contains("pipeline_mode<synchronous>") {
                Some(1)
            } else if e.contains("pipeline_mode<double_buffered>") {
                Some(2)
            } else {
                None
            }
        })
        .collect())
}

/// Reads `window_params = [{transform_indices = @f, window_bounds = array<i64: …>}, …]`.
fn window_params(kernel: &OperationRef<'_, '_>, count: usize) -> Result<Vec<WindowParam>> {
    let Some(entries) = window_entries(kernel, count)? else {
        return Ok(vec![None; count]);
    };
    entries
        .iter()
        .map(|e| {
            let field = |name: &str| -> Option<&str> {
                let at = e.find(&format!("{name} = "))? + name.len() + 3;
                let rest = &e[at..];
                let end = if rest.starts_with("array<") {
                    rest.find('>')? + 1
                } else {
                    rest.find(", ").unwrap_or(rest.len())
                };
                Some(&rest[..end])
            };
            match (field("transform_indices"), field("window_bounds")) {
                (Some(t), Some(w)) => {
                    let bounds: Vec<usize> = text::int_array(w)?
                        .into_iter()
                        .map(|n| n as usize)
                        .collect();
                    let element = element_window::low_padding(e, bounds.len())?;
                    Ok(Some((
                        t.trim_start_matches('@').to_string(),
                        bounds,
                        element,
                    )))
                }
                _ => Ok(None),
            }
        })
        .collect()
}
