//! Host arrays: what callers pass in and get back, one ndarray per element type.
//!
//! Storage is shared and copy-on-write (`ArcArray`): cloning an array, or reshaping a
//! row-major one, copies no elements — hosts reshape and pass arrays around a lot (flattened
//! for a 1-D kernel, viewed as rows) — and writing through [`HostArray::data_ptr_mut`] first
//! makes the storage unique, so a kernel's output never writes into an array shared with
//! anything else. A [`HostArray::Borrowed`] array reads memory someone else owns (a caller's
//! buffer) in place, and is copied the same way before anything writes to it.

use crate::borrowed::{Borrowed, borrowed_view};
use crate::placement;
use half::{bf16, f16};
use ndarray::{ArcArray, ArrayD, Dimension, IxDyn};
use tpukit_dsl::{DType, bits_of, from_bits};

/// A row-major array on the host.
#[derive(Clone, Debug)]
pub enum HostArray {
    F32(ArcArray<f32, IxDyn>),
    BF16(ArcArray<bf16, IxDyn>),
    F16(ArcArray<f16, IxDyn>),
    I32(ArcArray<i32, IxDyn>),
    I16(ArcArray<i16, IxDyn>),
    I8(ArcArray<i8, IxDyn>),
    Bool(ArcArray<bool, IxDyn>),
    /// Elements of any dtype in memory another owner keeps alive, read in place, never
    /// written (made by [`HostArray::borrowed`]; see `borrowed.rs`). The typed accessors
    /// (`as_f32`, …) give `None` for it: [`HostArray::owned`] makes an owned copy.
    Borrowed(Borrowed),
}

/// `$e` on the owned array of each dtype's variant, `$be` on a borrowed one.
macro_rules! per_dtype {
    ($self:expr, $a:ident => $e:expr, $b:ident => $be:expr) => {
        match $self {
            HostArray::F32($a) => $e,
            HostArray::BF16($a) => $e,
            HostArray::F16($a) => $e,
            HostArray::I32($a) => $e,
            HostArray::I16($a) => $e,
            HostArray::I8($a) => $e,
            HostArray::Bool($a) => $e,
            HostArray::Borrowed($b) => $be,
        }
    };
}

/// `per_dtype!` on an owned array, rebuilding the same variant from the arm's result.
macro_rules! per_dtype_map {
    ($self:expr, $a:ident => $e:expr, $b:ident => $be:expr) => {
        match $self {
            HostArray::F32($a) => HostArray::F32($e),
            HostArray::BF16($a) => HostArray::BF16($e),
            HostArray::F16($a) => HostArray::F16($e),
            HostArray::I32($a) => HostArray::I32($e),
            HostArray::I16($a) => HostArray::I16($e),
            HostArray::I8($a) => HostArray::I8($e),
            HostArray::Bool($a) => HostArray::Bool($e),
            HostArray::Borrowed($b) => $be,
        }
    };
}

macro_rules! element {
    ($($t:ty => $variant:ident, $as_ref:ident, $into:ident);* $(;)?) => {$(
        impl<D: Dimension> From<ndarray::Array<$t, D>> for HostArray {
            fn from(a: ndarray::Array<$t, D>) -> HostArray {
                HostArray::$variant(a.into_dyn().into_shared())
            }
        }
        impl HostArray {
            pub fn $as_ref(&self) -> Option<&ArcArray<$t, IxDyn>> {
                match self {
                    HostArray::$variant(a) => Some(a),
                    _ => None,
                }
            }
            /// The elements as an owned array (a copy only if the storage is shared or
            /// borrowed).
            pub fn $into(self) -> Option<ArrayD<$t>> {
                match self.into_owned() {
                    HostArray::$variant(a) => Some(a.into_owned()),
                    _ => None,
                }
            }
        }
    )*};
}

element! {
    f32 => F32, as_f32, into_f32;
    bf16 => BF16, as_bf16, into_bf16;
    f16 => F16, as_f16, into_f16;
    i32 => I32, as_i32, into_i32;
    i16 => I16, as_i16, into_i16;
    i8 => I8, as_i8, into_i8;
    bool => Bool, as_bool, into_bool;
}

impl HostArray {
    pub fn dtype(&self) -> DType {
        match self {
            HostArray::F32(_) => DType::F32,
            HostArray::BF16(_) => DType::BF16,
            HostArray::F16(_) => DType::F16,
            HostArray::I32(_) => DType::I32,
            HostArray::I16(_) => DType::I16,
            HostArray::I8(_) => DType::I8,
            HostArray::Bool(_) => DType::Bool,
            HostArray::Borrowed(b) => b.dtype,
        }
    }

    pub fn shape(&self) -> &[usize] {
        per_dtype!(self, a => a.shape(), b => b.shape.slice())
    }

    pub fn zeros(dtype: DType, shape: &[usize]) -> HostArray {
        let shape = IxDyn(shape);
        match dtype {
            DType::F32 => HostArray::F32(ArcArray::zeros(shape)),
            DType::BF16 => HostArray::BF16(ArcArray::from_elem(shape, bf16::ZERO)),
            DType::F16 => HostArray::F16(ArcArray::from_elem(shape, f16::ZERO)),
            DType::I32 => HostArray::I32(ArcArray::zeros(shape)),
            DType::I16 => HostArray::I16(ArcArray::zeros(shape)),
            DType::I8 => HostArray::I8(ArcArray::zeros(shape)),
            DType::Bool => HostArray::Bool(ArcArray::from_elem(shape, false)),
        }
    }

    /// [`HostArray::zeros`], or an [`ErrorKind::Memory`](tpukit_dsl::ErrorKind::Memory)
    /// error naming `what` if the memory cannot be allocated (or its size overflows): the
    /// sizes of outputs come from callers' shapes.
    pub fn try_zeros(
        dtype: DType,
        shape: &[usize],
        what: &str,
    ) -> Result<HostArray, crate::RuntimeError> {
        // SAFETY: zeroed elements are initialised.
        unsafe { HostArray::try_new(dtype, shape, &|| what.to_string(), Contents::Zeros, None) }
    }

    /// A new output of a launch holding `contents` (`what` formatted only for an error:
    /// launches make outputs at every call), placed in its page apart from the kernel's
    /// `inputs` (their addresses) if it is large enough to matter (see `placement.rs`).
    ///
    /// # Safety
    /// For [`Contents::Uninit`], the elements are uninitialised: nothing may read them before
    /// a kernel has written every one (an output it writes whole, see `coverage.rs`), and the
    /// array must be dropped unread if the kernel fails.
    pub(crate) unsafe fn try_output(
        dtype: DType,
        shape: &[usize],
        what: &dyn Fn() -> String,
        contents: Contents,
        inputs: &[*const u8],
    ) -> Result<HostArray, crate::RuntimeError> {
        // SAFETY: the caller's contract.
        unsafe { HostArray::try_new(dtype, shape, what, contents, Some(inputs)) }
    }

    /// A new array of `dtype` and `shape` holding `contents` (placed apart from the
    /// addresses in `apart`, if given), or an
    /// [`ErrorKind::Memory`](tpukit_dsl::ErrorKind::Memory) error naming `what` (formatted
    /// only then) if its size overflows or the memory cannot be had.
    ///
    /// # Safety
    /// For [`Contents::Uninit`], [`HostArray::try_output`]'s contract.
    unsafe fn try_new(
        dtype: DType,
        shape: &[usize],
        what: &dyn Fn() -> String,
        contents: Contents,
        apart: Option<&[*const u8]>,
    ) -> Result<HostArray, crate::RuntimeError> {
        let what = || format!("{} ({dtype}, shape {shape:?})", what());
        // ndarray's rule: the non-zero extents multiply to at most `isize::MAX`, even when
        // another extent is 0.
        let nonzero = shape
            .iter()
            .filter(|&&d| d != 0)
            .try_fold(1usize, |n, &d| n.checked_mul(d))
            .filter(|&n| n <= isize::MAX as usize)
            .ok_or_else(|| crate::alloc::out_of_memory(&what(), None))?;
        let n = if shape.contains(&0) { 0 } else { nonzero };
        let size = dtype.size_bytes();
        let bytes = n.checked_mul(size);
        let offset = apart
            .filter(|_| bytes.is_some_and(|b| b >= placement::MIN_BYTES))
            .map(placement::page_offset_apart);
        let slack = if offset.is_some() {
            placement::PAGE / size
        } else {
            0
        };
        let room = n
            .checked_add(slack)
            .ok_or_else(|| crate::alloc::out_of_memory(&what(), None))?;
        macro_rules! new {
            ($variant:ident) => {{
                let v = match contents {
                    Contents::Zeros => crate::alloc::zeroed(room, ""),
                    // SAFETY: this function's contract.
                    Contents::Uninit => unsafe { crate::alloc::uninit_elements(room, "") },
                }
                .map_err(|_| crate::alloc::out_of_memory(&what(), bytes))?;
                let first = offset.map_or(0, |o| {
                    placement::first_element(v.as_ptr() as usize, size, o)
                });
                HostArray::$variant(
                    ArcArray::from_vec(v)
                        .slice_move(ndarray::s![first..first + n])
                        .into_shape_with_order(IxDyn(shape))
                        .expect("n contiguous elements"),
                )
            }};
        }
        Ok(match dtype {
            DType::F32 => new!(F32),
            DType::BF16 => new!(BF16),
            DType::F16 => new!(F16),
            DType::I32 => new!(I32),
            DType::I16 => new!(I16),
            DType::I8 => new!(I8),
            DType::Bool => new!(Bool),
        })
    }

    /// The elements in row-major order, exactly (every dtype's values are f64 values).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        self.try_to_f64_vec("a host array as f64 values")
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`HostArray::to_f64_vec`], or an [`ErrorKind::Memory`](tpukit_dsl::ErrorKind::Memory)
    /// error naming `what` if the memory cannot be allocated (8 bytes per element: the
    /// interpreter's copy of a large array may not fit where the array does).
    pub fn try_to_f64_vec(&self, what: &str) -> Result<Vec<f64>, crate::RuntimeError> {
        if self.is_borrowed() {
            return self.owned().try_to_f64_vec(what);
        }
        let n = self.shape().iter().product::<usize>();
        let mut v = Vec::new();
        v.try_reserve_exact(n)
            .map_err(|_| crate::alloc::out_of_memory(what, n.checked_mul(8)))?;
        match self {
            // Through the bits: NaNs keep their payloads (`tpukit_dsl::from_bits`).
            HostArray::F32(a) => {
                v.extend(a.iter().map(|x| from_bits(DType::F32, x.to_bits().into())))
            }
            HostArray::BF16(a) => {
                v.extend(a.iter().map(|x| from_bits(DType::BF16, x.to_bits().into())))
            }
            HostArray::F16(a) => {
                v.extend(a.iter().map(|x| from_bits(DType::F16, x.to_bits().into())))
            }
            HostArray::I32(a) => v.extend(a.iter().map(|&x| x as f64)),
            HostArray::I16(a) => v.extend(a.iter().map(|&x| x as f64)),
            HostArray::I8(a) => v.extend(a.iter().map(|&x| x as f64)),
            HostArray::Bool(a) => v.extend(a.iter().map(|&x| x as u8 as f64)),
            HostArray::Borrowed(_) => unreachable!("owned above"),
        }
        Ok(v)
    }

    /// An array of `dtype` from row-major values, each converted as a kernel `cast` would.
    pub fn from_f64(dtype: DType, shape: &[usize], data: &[f64]) -> HostArray {
        let shape = IxDyn(shape);
        let a = match dtype {
            // Through the bits, as `to_f64_vec` reads them: NaNs keep their payloads.
            DType::F32 => ArcArray::from_shape_vec(
                shape,
                data.iter()
                    .map(|&x| f32::from_bits(bits_of(dtype, x) as u32))
                    .collect(),
            )
            .map(HostArray::F32),
            DType::BF16 => ArcArray::from_shape_vec(
                shape,
                data.iter()
                    .map(|&x| bf16::from_bits(bits_of(dtype, x) as u16))
                    .collect(),
            )
            .map(HostArray::BF16),
            DType::F16 => ArcArray::from_shape_vec(
                shape,
                data.iter()
                    .map(|&x| f16::from_bits(bits_of(dtype, x) as u16))
                    .collect(),
            )
            .map(HostArray::F16),
            DType::I32 => ArcArray::from_shape_vec(
                shape,
                data.iter()
                    .map(|&x| DType::I32.cast_f64_to_int(x) as i32)
                    .collect(),
            )
            .map(HostArray::I32),
            DType::I16 => ArcArray::from_shape_vec(
                shape,
                data.iter()
                    .map(|&x| DType::I16.cast_f64_to_int(x) as i16)
                    .collect(),
            )
            .map(HostArray::I16),
            DType::I8 => ArcArray::from_shape_vec(
                shape,
                data.iter()
                    .map(|&x| DType::I8.cast_f64_to_int(x) as i8)
                    .collect(),
            )
            .map(HostArray::I8),
            DType::Bool => {
                ArcArray::from_shape_vec(shape, data.iter().map(|&x| x != 0.0).collect())
                    .map(HostArray::Bool)
            }
        };
        a.expect("data length matches the shape")
    }
}

impl HostArray {
    /// This array with row-major contiguous storage: borrowed if it already is, else a copy.
    pub(crate) fn standard_layout(&self) -> std::borrow::Cow<'_, HostArray> {
        if per_dtype!(self, a => a.is_standard_layout(), _b => true) {
            std::borrow::Cow::Borrowed(self)
        } else {
            let mut copy = self.clone();
            copy.make_standard_layout();
            std::borrow::Cow::Owned(copy)
        }
    }

    /// Whether the storage is row-major contiguous (a borrowed array's always is).
    pub fn is_standard_layout(&self) -> bool {
        per_dtype!(self, a => a.is_standard_layout(), _b => true)
    }

    /// Makes the storage row-major contiguous (a no-op when it is).
    pub fn make_standard_layout(&mut self) {
        per_dtype!(self, a => if !a.is_standard_layout() {
            *a = a.as_standard_layout().into_owned().into_shared();
        }, _b => {})
    }

    /// The address of the first element (row-major contiguous storage assumed).
    pub fn data_ptr(&self) -> *const u8 {
        per_dtype!(self, a => a.as_ptr() as *const u8, b => b.data)
    }

    /// [`HostArray::data_ptr`], for writing: the storage is made unique first (copied if
    /// it is shared with another array, or borrowed).
    pub fn data_ptr_mut(&mut self) -> *mut u8 {
        if self.is_borrowed() {
            *self = self.owned().into_owned();
        }
        per_dtype!(self, a => a.as_mut_ptr() as *mut u8, _b => unreachable!("owned above"))
    }

    /// The size of the elements in bytes.
    pub fn size_bytes(&self) -> usize {
        self.shape().iter().product::<usize>() * self.dtype().size_bytes()
    }
}

impl HostArray {
    /// The same elements (row-major) in a new shape of the same size; `None` if the sizes
    /// differ. No copy when the storage is already row-major contiguous.
    pub fn reshape(mut self, shape: &[usize]) -> Option<HostArray> {
        if shape.iter().product::<usize>() != self.shape().iter().product::<usize>() {
            return None;
        }
        self.make_standard_layout();
        let shape = IxDyn(shape);
        Some(per_dtype_map!(self, a => a
            .into_shape_with_order(shape)
            .expect("sizes match"), b => HostArray::Borrowed(Borrowed { shape, ..b })))
    }
}

impl HostArray {
    /// A row-major copy with the axes reordered: axis `i` of the result is axis `axes[i]` of
    /// `self` (`torch.permute(...).contiguous()`).
    pub fn permuted(&self, axes: &[usize]) -> HostArray {
        per_dtype_map!(self.clone(), a => a
            .permuted_axes(axes)
            .as_standard_layout()
            .into_owned()
            .into_shared(), b => borrowed_view!(&b, v => v
            .permuted_axes(axes)
            .as_standard_layout()
            .into_owned()
            .into()))
    }
}

impl HostArray {
    /// An array over `shape` elements of `dtype` at `data`, read in place, kept alive by
    /// `owner` (dropped when the last clone or reshape of the array is).
    ///
    /// # Safety
    /// `data` addresses `product(shape) * dtype.size_bytes()` bytes of row-major elements of
    /// `dtype`, aligned to its element size (for `bool`, bytes that are 0 or 1), that stay
    /// valid, and that nobody writes, for as long as `owner` lives in any array made from this
    /// one. Callers that cannot promise that for longer than a call drop every such array (or
    /// make them [`HostArray::owned`]) before it returns.
    pub unsafe fn borrowed(
        dtype: DType,
        shape: &[usize],
        data: *const u8,
        owner: std::sync::Arc<dyn std::any::Any + Send + Sync>,
    ) -> HostArray {
        debug_assert!((data as usize).is_multiple_of(dtype.size_bytes()));
        HostArray::Borrowed(Borrowed {
            dtype,
            shape: IxDyn(shape),
            data,
            _owner: owner,
        })
    }

    /// Whether the elements are in memory another owner keeps ([`HostArray::borrowed`]).
    pub fn is_borrowed(&self) -> bool {
        matches!(self, HostArray::Borrowed(_))
    }

    /// This array with its own storage: itself if it has it, else a copy of the borrowed
    /// elements.
    pub fn owned(&self) -> std::borrow::Cow<'_, HostArray> {
        match self {
            HostArray::Borrowed(b) => {
                std::borrow::Cow::Owned(borrowed_view!(b, v => v.to_owned().into()))
            }
            owned => std::borrow::Cow::Borrowed(owned),
        }
    }

    /// [`HostArray::owned`], by value: no copy unless the array is borrowed.
    pub fn into_owned(self) -> HostArray {
        match self {
            HostArray::Borrowed(_) => self.owned().into_owned(),
            owned => owned,
        }
    }
}

impl PartialEq for HostArray {
    /// Equal dtypes, shapes and elements (`==` on the elements, so a NaN equals nothing),
    /// whether borrowed or owned.
    fn eq(&self, other: &HostArray) -> bool {
        use HostArray as H;
        match (self, other) {
            (H::Borrowed(_), _) | (_, H::Borrowed(_)) => *self.owned() == *other.owned(),
            (H::F32(a), H::F32(b)) => a == b,
            (H::BF16(a), H::BF16(b)) => a == b,
            (H::F16(a), H::F16(b)) => a == b,
            (H::I32(a), H::I32(b)) => a == b,
            (H::I16(a), H::I16(b)) => a == b,
            (H::I8(a), H::I8(b)) => a == b,
            (H::Bool(a), H::Bool(b)) => a == b,
            _ => false,
        }
    }
}

/// What a new host array holds ([`HostArray::try_zeros`], [`HostArray::try_output`]).
#[derive(Copy, Clone)]
pub(crate) enum Contents {
    Zeros,
    /// Whatever the memory held: a kernel writes every element first.
    Uninit,
}
