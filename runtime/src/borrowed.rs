//! Host arrays over memory someone else owns ([`HostArray::Borrowed`]): a caller's buffers
//! (Python's numpy arrays and torch tensors) read in place by launches and by hosts that
//! present them to kernels (reshaped, passed around), without first copying them into an
//! owned array.
//!
//! A borrowed array is read-only: writing through [`HostArray::data_ptr_mut`] first copies it
//! into an owned array (copy-on-write, as for shared owned storage), so no kernel output ever
//! writes into the owner's memory. It is always row-major and contiguous.
//!
//! [`HostArray::Borrowed`]: crate::HostArray::Borrowed
//! [`HostArray::data_ptr_mut`]: crate::HostArray::data_ptr_mut

use ndarray::{ArrayViewD, Dimension, IxDyn};
use std::any::Any;
use std::sync::Arc;
use tpukit_dsl::DType;

/// Row-major contiguous elements at `data`, kept alive by `owner`.
///
/// Invariant (the contract of [`crate::HostArray::borrowed`]): `data` addresses
/// `product(shape) * dtype.size_bytes()` bytes, aligned to the element size, of valid
/// elements of `dtype` (for `bool`, bytes that are 0 or 1), which stay valid and unwritten
/// while any clone of this array lives.
#[derive(Clone)]
pub struct Borrowed {
    pub(crate) dtype: DType,
    pub(crate) shape: IxDyn,
    pub(crate) data: *const u8,
    /// Whatever keeps `data` alive (a held Python buffer); shared by every clone and reshape.
    pub(crate) _owner: Arc<dyn Any + Send + Sync>,
}

// SAFETY: the memory is only read (writers copy it first), and it stays valid while the
// owner lives (the type's invariant); the owner itself is `Send + Sync`.
unsafe impl Send for Borrowed {}
// SAFETY: as for `Send`: shared references only ever read the memory.
unsafe impl Sync for Borrowed {}

impl std::fmt::Debug for Borrowed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Borrowed({}, shape {:?}, at {:p})",
            self.dtype,
            self.shape.slice(),
            self.data
        )
    }
}

impl Borrowed {
    /// The elements as a view, which lives no longer than `self` (and so than the owner).
    ///
    /// # Safety
    /// `T` is the Rust type of `self.dtype`.
    pub(crate) unsafe fn view<T>(&self) -> ArrayViewD<'_, T> {
        debug_assert_eq!(size_of::<T>(), self.dtype.size_bytes());
        // SAFETY: the type's invariant (row-major, aligned, valid elements for `self`'s
        // life), and `T` is the element type (the caller's contract).
        unsafe { ArrayViewD::from_shape_ptr(self.shape.clone(), self.data as *const T) }
    }
}

/// Runs `$e` with `$v` bound to the typed view of a [`Borrowed`] array.
macro_rules! borrowed_view {
    ($b:expr, $v:ident => $e:expr) => {{
        let b: &$crate::borrowed::Borrowed = $b;
        // SAFETY: each arm views the elements as the Rust type of the array's dtype.
        unsafe {
            match b.dtype {
                ::tpukit_dsl::DType::F32 => {
                    let $v = b.view::<f32>();
                    $e
                }
                ::tpukit_dsl::DType::BF16 => {
                    let $v = b.view::<::half::bf16>();
                    $e
                }
                ::tpukit_dsl::DType::F16 => {
                    let $v = b.view::<::half::f16>();
                    $e
                }
                ::tpukit_dsl::DType::I32 => {
                    let $v = b.view::<i32>();
                    $e
                }
                ::tpukit_dsl::DType::I16 => {
                    let $v = b.view::<i16>();
                    $e
                }
                ::tpukit_dsl::DType::I8 => {
                    let $v = b.view::<i8>();
                    $e
                }
                ::tpukit_dsl::DType::Bool => {
                    let $v = b.view::<bool>();
                    $e
                }
            }
        }
    }};
}
pub(crate) use borrowed_view;
