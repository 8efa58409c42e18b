//! tpukit as an XLA FFI target: the handler XLA's CPU runtime calls for a
//! `stablehlo.custom_call @tpukit_kernel` inside a jitted JAX program.
//!
//! The structs below mirror, field for field, the ones of jaxlib's `xla/ffi/api/c_api.h`
//! (typed FFI, API version 0.3) that the handler reads or writes; each names its C struct.
//! Only what the handler needs is mirrored: a struct read only up to some field stops there,
//! and its `struct_size` is checked to cover that field.
//!
//! Invariants the handler keeps:
//! - it never unwinds into XLA: its body runs under `catch_unwind`, a panic becomes an
//!   `INTERNAL` FFI error naming it;
//! - every failure is an FFI error made by the `XLA_FFI_Error_Create` of the API table XLA
//!   passed, whose message is tpukit's (`tpukit <kind> error: kernel `k`: …`);
//! - it touches no Python object (XLA calls it on its own threads, without the GIL).
//!
//! The kernel to run is the `kernel` attribute: an id into [`crate::registry`], which Python
//! fills when it builds the custom call. XLA's operand and result buffers are handed to the
//! kernel as they are (`tpukit::RawArray`s: zero-copy on the `cpu` device).

use std::ffi::{CString, c_char, c_int, c_void};
use std::mem::{offset_of, size_of};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr::null_mut;
use tpukit::runtime::RawArray;
use tpukit_dsl::{DType, ErrorKind};

use crate::{error, registry};

/// `XLA_FFI_Extension_Base`.
#[repr(C)]
struct ExtensionBase {
    struct_size: usize,
    /// `XLA_FFI_Extension_Type`.
    kind: c_int,
    next: *mut ExtensionBase,
}

/// `XLA_FFI_Extension_Metadata`.
const EXTENSION_METADATA: c_int = 1;

/// `XLA_FFI_Api_Version`.
#[repr(C)]
struct ApiVersion {
    struct_size: usize,
    extension_start: *mut ExtensionBase,
    major_version: c_int,
    minor_version: c_int,
}

/// `XLA_FFI_API_MAJOR`, `XLA_FFI_API_MINOR` of the header mirrored here.
const API_MAJOR: c_int = 0;
const API_MINOR: c_int = 3;

/// `XLA_FFI_Error`: opaque, made and owned by XLA.
#[repr(C)]
pub struct XlaError {
    _opaque: [u8; 0],
}

/// `XLA_FFI_Error_Create_Args`.
#[repr(C)]
struct ErrorCreateArgs {
    struct_size: usize,
    extension_start: *mut ExtensionBase,
    message: *const c_char,
    /// `XLA_FFI_Error_Code`.
    errc: c_int,
}

/// `XLA_FFI_Error_Code` values used here.
mod code {
    use std::ffi::c_int;
    pub const INVALID_ARGUMENT: c_int = 3;
    pub const RESOURCE_EXHAUSTED: c_int = 8;
    pub const OUT_OF_RANGE: c_int = 11;
    pub const UNIMPLEMENTED: c_int = 12;
    pub const INTERNAL: c_int = 13;
}

/// `XLA_FFI_Api`, read up to `XLA_FFI_Error_Create` (the only function the handler calls).
#[repr(C)]
struct Api {
    struct_size: usize,
    extension_start: *mut ExtensionBase,
    api_version: ApiVersion,
    internal_api: *const c_void,
    error_create: Option<unsafe extern "C" fn(*mut ErrorCreateArgs) -> *mut XlaError>,
}

/// `XLA_FFI_DataType` values of the dtypes tpukit runs.
fn dtype_of(code: c_int) -> Option<DType> {
    Some(match code {
        1 => DType::Bool,  // PRED
        2 => DType::I8,    // S8
        3 => DType::I16,   // S16
        4 => DType::I32,   // S32
        10 => DType::F16,  // F16
        11 => DType::F32,  // F32
        16 => DType::BF16, // BF16
        _ => return None,
    })
}

/// `XLA_FFI_Buffer`.
#[repr(C)]
struct Buffer {
    struct_size: usize,
    extension_start: *mut ExtensionBase,
    /// `XLA_FFI_DataType`.
    dtype: c_int,
    data: *mut c_void,
    rank: i64,
    dims: *const i64,
}

/// `XLA_FFI_ArgType_BUFFER` and `XLA_FFI_RetType_BUFFER`.
const BUFFER: c_int = 1;
/// `XLA_FFI_AttrType_SCALAR`.
const ATTR_SCALAR: c_int = 3;
/// `XLA_FFI_DataType` of the integer attribute types accepted for the kernel id.
const S32: c_int = 4;
const S64: c_int = 5;

/// `XLA_FFI_Args` and `XLA_FFI_Rets` (the same layout: a count, types, pointers).
#[repr(C)]
struct Operands {
    struct_size: usize,
    extension_start: *mut ExtensionBase,
    size: i64,
    types: *const c_int,
    items: *const *mut c_void,
}

/// `XLA_FFI_ByteSpan`.
#[repr(C)]
struct ByteSpan {
    ptr: *const c_char,
    len: usize,
}

/// `XLA_FFI_Scalar`.
#[repr(C)]
struct Scalar {
    dtype: c_int,
    value: *const c_void,
}

/// `XLA_FFI_Attrs`.
#[repr(C)]
struct Attrs {
    struct_size: usize,
    extension_start: *mut ExtensionBase,
    size: i64,
    types: *const c_int,
    names: *const *const ByteSpan,
    attrs: *const *const c_void,
}

/// `XLA_FFI_CallFrame`, up to `attrs` (its `XLA_FFI_CallFrame_STRUCT_SIZE`).
#[repr(C)]
pub struct CallFrame {
    struct_size: usize,
    extension_start: *mut ExtensionBase,
    api: *const Api,
    ctx: *mut c_void,
    /// `XLA_FFI_ExecutionStage`.
    stage: c_int,
    args: Operands,
    rets: Operands,
    attrs: Attrs,
}

/// `XLA_FFI_ExecutionStage_EXECUTE`.
const STAGE_EXECUTE: c_int = 3;

/// `XLA_FFI_Metadata`.
#[repr(C)]
struct Metadata {
    struct_size: usize,
    api_version: ApiVersion,
    /// `XLA_FFI_Handler_Traits`.
    traits: u32,
    /// `XLA_FFI_TypeId`.
    state_type_id: i64,
}

/// `XLA_FFI_Metadata_Extension`.
#[repr(C)]
struct MetadataExtension {
    extension_base: ExtensionBase,
    metadata: *mut Metadata,
}

/// `XLA_FFI_STRUCT_SIZE(T, last_field)`: the size XLA puts in `struct_size`.
macro_rules! struct_size {
    ($t:ty, $last:ident, $field_t:ty) => {
        offset_of!($t, $last) + size_of::<$field_t>()
    };
}

/// Why a call failed: an `XLA_FFI_Error_Code` and tpukit's message.
struct Failure {
    code: c_int,
    message: String,
}

impl Failure {
    fn new(kind: ErrorKind, message: impl std::fmt::Display) -> Failure {
        let code = match kind {
            ErrorKind::Unsupported => code::UNIMPLEMENTED,
            ErrorKind::Bounds => code::OUT_OF_RANGE,
            ErrorKind::Internal => code::INTERNAL,
            ErrorKind::Memory => code::RESOURCE_EXHAUSTED,
            ErrorKind::Invalid | ErrorKind::Shape | ErrorKind::DType => code::INVALID_ARGUMENT,
        };
        Failure {
            code,
            message: format!("tpukit {} error: {message}", kind.name()),
        }
    }

    fn invalid(message: impl std::fmt::Display) -> Failure {
        Failure::new(ErrorKind::Invalid, message)
    }
}

/// The handler XLA calls (`XLA_FFI_Handler`), registered for the execute stage.
///
/// # Safety
/// `frame` is a call frame XLA built for this call (valid for its duration).
pub unsafe extern "C" fn handler(frame: *mut CallFrame) -> *mut XlaError {
    if frame.is_null() {
        fatal("no call frame");
    }
    // SAFETY: XLA passes a valid frame; `api` comes right after `struct_size` and
    // `extension_start` in every version, and `call` checks the size before reading further.
    let api = unsafe { (*frame).api };
    let result = catch_unwind(AssertUnwindSafe(|| {
        error::panic_if_armed();
        // SAFETY: as above; `call` checks the frame's size first.
        unsafe { call(&mut *frame) }
    }));
    let failure = match result {
        Ok(Ok(())) => return null_mut(),
        Ok(Err(failure)) => failure,
        Err(payload) => Failure::new(ErrorKind::Internal, error::panic_message(payload.as_ref())),
    };
    // SAFETY: `api` is the table of the frame XLA passed.
    unsafe { create_error(api, failure) }
}

/// Reports `failure` through the API table's `XLA_FFI_Error_Create` (which copies the
/// message).
///
/// # Safety
/// `api` is null or XLA's API table.
unsafe fn create_error(api: *const Api, failure: Failure) -> *mut XlaError {
    let needed = struct_size!(Api, error_create, usize);
    // SAFETY: `api` is checked non-null and its size checked to cover `error_create`.
    let create = unsafe { api.as_ref() }
        .filter(|a| a.struct_size >= needed)
        .and_then(|a| a.error_create);
    let Some(create) = create else {
        fatal("the XLA FFI API table has no XLA_FFI_Error_Create")
    };
    let message = CString::new(failure.message.replace('\0', " ")).expect("no NUL left");
    let mut args = ErrorCreateArgs {
        struct_size: struct_size!(ErrorCreateArgs, errc, c_int),
        extension_start: null_mut(),
        message: message.as_ptr(),
        errc: failure.code,
    };
    // SAFETY: the arguments are valid for the call; XLA copies the message.
    unsafe { create(&mut args) }
}

/// An FFI frame tpukit cannot even report an error through (a jaxlib whose ABI is not the
/// one mirrored here): nothing sane can continue, so stop loudly rather than return a
/// success with results never written.
fn fatal(what: &str) -> ! {
    eprintln!("tpukit: XLA FFI handler: {what}; aborting (an incompatible jaxlib?)");
    std::process::abort()
}

/// Answers a metadata query or runs the kernel of an execute call.
///
/// # Safety
/// `frame` is a valid call frame.
unsafe fn call(frame: &mut CallFrame) -> Result<(), Failure> {
    let frame_size = struct_size!(CallFrame, attrs, Attrs);
    if frame.struct_size < frame_size {
        return Err(Failure::invalid(format!(
            "XLA_FFI_CallFrame has size {}, expected at least {frame_size} (an incompatible \
             jaxlib?)",
            frame.struct_size
        )));
    }
    // SAFETY: a non-null extension starts with `XLA_FFI_Extension_Base`.
    if let Some(ext) = unsafe { frame.extension_start.as_ref() }
        && ext.kind == EXTENSION_METADATA
    {
        // SAFETY: an extension of the metadata type is an `XLA_FFI_Metadata_Extension`.
        return unsafe { fill_metadata(&mut *(frame.extension_start as *mut MetadataExtension)) };
    }
    if frame.stage != STAGE_EXECUTE {
        return Err(Failure::invalid(format!(
            "called at execution stage {}, registered for execute ({STAGE_EXECUTE})",
            frame.stage
        )));
    }
    // SAFETY: the frame's attributes, arguments and results are valid for the call.
    let id = unsafe { kernel_id(&frame.attrs) }?;
    let entry = registry::get(id).ok_or_else(|| {
        Failure::invalid(format!(
            "no kernel with id {id} in this process: the id fingerprints the kernel, device, \
             aliasing and debug mode; a program built in another process (a deserialized \
             jax.export) runs once the same tpukit call has been traced in this one"
        ))
    })?;
    // SAFETY: the frame's operand lists are valid for the call.
    let (args, rets) = unsafe {
        (
            buffers(&frame.args, "argument")?,
            buffers(&frame.rets, "result")?,
        )
    };
    let arg_sigs = args
        .iter()
        .map(|&b| unsafe { signature(b) })
        .collect::<Result<Vec<_>, _>>()?;
    let ret_sigs = rets
        .iter()
        .map(|&b| unsafe { signature(b) })
        .collect::<Result<Vec<_>, _>>()?;
    let (inputs, outputs) = (raw_arrays(&args, &arg_sigs), raw_arrays(&rets, &ret_sigs));
    // SAFETY: XLA's buffers hold row-major data of their dtype and dims for the call; result
    // buffers are this call's to write and alias no operand but, for an output the kernel
    // aliases to an input (the custom call's `output_operand_aliases`), that input's buffer.
    unsafe { entry.run(&inputs, &outputs) }.map_err(|e| Failure::new(e.kind, e.message))
}

/// The buffers as the runtime's borrowed arrays, with their dtypes and shapes.
fn raw_arrays<'a>(buffers: &[&Buffer], signatures: &'a [(DType, Vec<usize>)]) -> Vec<RawArray<'a>> {
    buffers
        .iter()
        .zip(signatures)
        .map(|(b, (dtype, shape))| RawArray {
            dtype: *dtype,
            shape,
            data: b.data as *mut u8,
        })
        .collect()
}

/// Fills in the handler's metadata: the FFI version of the mirrored header, no traits, no
/// state.
///
/// # Safety
/// `ext` is XLA's metadata extension.
unsafe fn fill_metadata(ext: &mut MetadataExtension) -> Result<(), Failure> {
    let ext_size = struct_size!(MetadataExtension, metadata, usize);
    let metadata_size = struct_size!(Metadata, traits, u32);
    // SAFETY: checked non-null below before it is written.
    let metadata = unsafe { ext.metadata.as_mut() };
    match metadata {
        Some(m) if ext.extension_base.struct_size >= ext_size && m.struct_size >= metadata_size => {
            m.api_version = ApiVersion {
                struct_size: struct_size!(ApiVersion, minor_version, c_int),
                extension_start: null_mut(),
                major_version: API_MAJOR,
                minor_version: API_MINOR,
            };
            m.traits = 0;
            if m.struct_size >= struct_size!(Metadata, state_type_id, i64) {
                m.state_type_id = 0; // XLA_FFI_UNKNOWN_TYPE_ID
            }
            Ok(())
        }
        _ => Err(Failure::invalid(
            "XLA_FFI_Metadata_Extension too small (an incompatible jaxlib?)",
        )),
    }
}

/// The integer attribute `kernel`.
///
/// # Safety
/// `attrs` are the frame's attributes.
unsafe fn kernel_id(attrs: &Attrs) -> Result<u64, Failure> {
    for i in 0..attrs.size.max(0) as usize {
        // SAFETY: `names`, `types` and `attrs` have `size` valid entries.
        let (name, kind, attr) = unsafe {
            (
                &**attrs.names.add(i),
                *attrs.types.add(i),
                *attrs.attrs.add(i),
            )
        };
        // SAFETY: a byte span XLA made, valid for the call.
        let name = unsafe { std::slice::from_raw_parts(name.ptr as *const u8, name.len) };
        if name != b"kernel" {
            continue;
        }
        if kind != ATTR_SCALAR {
            break;
        }
        // SAFETY: a scalar attribute points at an `XLA_FFI_Scalar` whose value has its dtype.
        let scalar = unsafe { &*(attr as *const Scalar) };
        let id = match scalar.dtype {
            S64 => unsafe { *(scalar.value as *const i64) },
            S32 => i64::from(unsafe { *(scalar.value as *const i32) }),
            _ => break,
        };
        return u64::try_from(id).map_err(|_| Failure::invalid(format!("bad kernel id {id}")));
    }
    Err(Failure::invalid(
        "the custom call has no integer attribute `kernel` (build it with tpukit.pallas)",
    ))
}

/// The buffers of `XLA_FFI_Args` or `XLA_FFI_Rets`, checked to be buffers of the mirrored
/// size.
///
/// # Safety
/// `list` is one of the frame's operand lists.
unsafe fn buffers<'a>(list: &'a Operands, what: &str) -> Result<Vec<&'a Buffer>, Failure> {
    let size = struct_size!(Buffer, dims, usize);
    (0..list.size.max(0) as usize)
        .map(|i| {
            // SAFETY: `types` and `items` have `size` valid entries.
            let (kind, item) = unsafe { (*list.types.add(i), *list.items.add(i)) };
            // SAFETY: an item of type BUFFER is an `XLA_FFI_Buffer`.
            match unsafe { (item as *const Buffer).as_ref() } {
                Some(b) if kind == BUFFER && b.struct_size >= size => Ok(b),
                _ => Err(Failure::invalid(format!(
                    "{what} {i} is not an array buffer"
                ))),
            }
        })
        .collect()
}

/// A buffer's dtype and shape.
///
/// # Safety
/// `b` is a buffer of the frame.
unsafe fn signature(b: &Buffer) -> Result<(DType, Vec<usize>), Failure> {
    let dtype = dtype_of(b.dtype).ok_or_else(|| {
        Failure::new(
            ErrorKind::DType,
            format!(
                "XLA dtype {} is not one tpukit runs (f32, bf16, f16, i32, i16, i8, bool)",
                b.dtype
            ),
        )
    })?;
    // SAFETY: `dims` has `rank` entries.
    let dims = unsafe { std::slice::from_raw_parts(b.dims, b.rank.max(0) as usize) };
    Ok((dtype, dims.iter().map(|&d| d.max(0) as usize).collect()))
}
