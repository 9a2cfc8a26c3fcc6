//! Large arrays filled in parallel, on huge pages where the kernel offers them.
//!
//! A fresh `vec![x; n]` of hundreds of megabytes is paid for twice: the allocator maps
//! zero pages lazily, and the first write to each 4 KiB page faults on whichever thread
//! touches it (with a non-zero `x`, all of them on the calling thread, in one serial
//! `memset`). [`filled`] asks the kernel for transparent huge pages on the buffer
//! (`madvise(MADV_HUGEPAGE)`, Linux; 512 times fewer faults) and writes the initial value
//! with the rayon pool for `Par::Rayon`, so that the pages are faulted in by the threads
//! that later fill them. The contents are the same as `vec![x; n]` for either `Par`.
//!
//! ```
//! use tessera_core::{bulk, Par};
//! let v = bulk::filled(1 << 20, 7u32, Par::Rayon);
//! assert_eq!(v, vec![7u32; 1 << 20]);
//! ```

use crate::Par;
use rayon::prelude::*;

/// Buffers at least this large get the huge-page advice (smaller ones gain nothing).
pub const HUGE_PAGE_MIN_BYTES: usize = 8 << 20;

/// Elements written per parallel task by [`filled`].
const FILL_CHUNK_BYTES: usize = 1 << 20;

/// `vec![value; n]`, with huge-page advice for large buffers and, for `Par::Rayon`, the
/// first touch spread over the pool (see the module docs).
pub fn filled<T: Copy + Send + Sync>(n: usize, value: T, par: Par) -> Vec<T> {
    let mut v: Vec<T> = Vec::with_capacity(n);
    advise_huge_pages(&mut v);
    let chunk = (FILL_CHUNK_BYTES / std::mem::size_of::<T>().max(1)).max(1);
    let spare = &mut v.spare_capacity_mut()[..n];
    if par.is_parallel() && n > chunk {
        spare.par_chunks_mut(chunk).for_each(|c| {
            for x in c {
                x.write(value);
            }
        });
    } else {
        for x in spare {
            x.write(value);
        }
    }
    // SAFETY: the first `n` elements of the capacity were all initialised just above
    // (`spare` covers exactly `0..n`), and `n <= capacity`.
    unsafe { v.set_len(n) };
    v
}

/// Advise the kernel to back the (2 MiB-aligned part of the) capacity of `v` with
/// transparent huge pages; a hint without effect on the contents, ignored where
/// unsupported.
pub fn advise_huge_pages<T>(v: &mut Vec<T>) {
    let bytes = v.capacity() * std::mem::size_of::<T>();
    if bytes < HUGE_PAGE_MIN_BYTES {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let start = v.as_mut_ptr() as usize;
        let lo = start.next_multiple_of(HUGE);
        let hi = (start + bytes) & !(HUGE - 1);
        if hi > lo {
            // SAFETY: [lo, hi) lies inside the allocation owned by `v` (page aligned);
            // MADV_HUGEPAGE only changes how the kernel backs the range, never its
            // contents, and a failure (no THP support) is ignored.
            unsafe {
                libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_HUGEPAGE);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filled_equals_vec_macro_for_both_pars() {
        for n in [0usize, 1, 1000, (3 << 20) + 17] {
            for par in [Par::Seq, Par::Rayon] {
                assert_eq!(filled(n, 0xdead_beefu32, par), vec![0xdead_beefu32; n]);
                assert_eq!(filled(n, 0.0f32, par), vec![0.0f32; n]);
                assert_eq!(filled(n, -1i32, par), vec![-1i32; n]);
            }
        }
    }
}
