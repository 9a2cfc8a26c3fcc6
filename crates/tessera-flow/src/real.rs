//! The floating-point types the CPU reference runs in: `f64` where accuracy is measured
//! (manufactured solutions, the Galerkin identity), `f32` where it mirrors the GPU.

use std::fmt::Debug;
use std::iter::Sum;
use std::ops::{Add, AddAssign, Div, Mul, MulAssign, Neg, Sub, SubAssign};

/// `f32` or `f64`.
pub trait Real:
    Copy
    + Send
    + Sync
    + Default
    + Debug
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
    + AddAssign
    + SubAssign
    + MulAssign
    + Sum
    + 'static
{
    const ZERO: Self;
    const ONE: Self;
    /// Name for messages (`f32`, `f64`).
    const NAME: &'static str;
    fn from_f64(v: f64) -> Self;
    fn to_f64(self) -> f64;
    fn abs(self) -> Self;
    fn max(self, o: Self) -> Self;
    fn min(self, o: Self) -> Self;
}

macro_rules! real {
    ($t:ty) => {
        impl Real for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const NAME: &'static str = stringify!($t);
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
            #[inline(always)]
            fn max(self, o: Self) -> Self {
                <$t>::max(self, o)
            }
            #[inline(always)]
            fn min(self, o: Self) -> Self {
                <$t>::min(self, o)
            }
        }
    };
}
real!(f32);
real!(f64);

/// A slice that rayon tasks write at disjoint indices while others read indices nobody
/// writes in the same pass (the red-black sweeps: a pass writes one colour and reads the
/// other).
pub(crate) struct SharedSlice<'a, T> {
    ptr: *mut T,
    len: usize,
    _borrow: std::marker::PhantomData<&'a mut [T]>,
}

// SAFETY: access goes through `get`/`set`, whose callers guarantee that no element is
// written by one task while another task reads or writes it (see the type's docs).
unsafe impl<T: Send + Sync> Sync for SharedSlice<'_, T> {}
unsafe impl<T: Send + Sync> Send for SharedSlice<'_, T> {}

impl<'a, T: Copy> SharedSlice<'a, T> {
    pub(crate) fn new(s: &'a mut [T]) -> Self {
        SharedSlice {
            ptr: s.as_mut_ptr(),
            len: s.len(),
            _borrow: std::marker::PhantomData,
        }
    }
    /// Read element `i`.
    ///
    /// # Safety
    /// No other task writes element `i` during the current pass.
    #[inline(always)]
    pub(crate) unsafe fn get(&self, i: usize) -> T {
        debug_assert!(i < self.len);
        // SAFETY: in bounds (checked in debug builds, guaranteed by the grid indexing),
        // and not written concurrently (the caller's contract).
        unsafe { *self.ptr.add(i) }
    }
    /// Write element `i`.
    ///
    /// # Safety
    /// No other task reads or writes element `i` during the current pass.
    #[inline(always)]
    pub(crate) unsafe fn set(&self, i: usize, v: T) {
        debug_assert!(i < self.len);
        // SAFETY: in bounds, and exclusively owned by this task for the pass (the
        // caller's contract).
        unsafe { *self.ptr.add(i) = v }
    }
}
