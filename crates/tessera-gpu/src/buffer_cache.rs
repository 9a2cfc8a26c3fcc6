//! A cache of freed device buffers per [`Gpu`](crate::Gpu) stream, so that the next
//! allocation of the same element type and capacity reuses one without a driver call.
//!
//! An allocation through the driver's memory pool (`cuMemAllocAsync`) and its free each
//! cost 1-2.5 µs of host time on the H200, plus cudarc's two tracking events per buffer:
//! a mesh operation of 40-80 µs on the device allocates and frees two or three outputs,
//! so its host work can be a fifth of it, and the device idles while the host works. A
//! dropped [`DeviceBuffer`](crate::DeviceBuffer) goes back to the cache of the `Gpu` that
//! allocated it instead (one lock and a few comparisons), and the next request for that
//! type and capacity on that `Gpu` takes it (the most recently freed first, likely still
//! in the L2). Reuse is ordered on the one stream that used the buffer, as the pool's own
//! reuse is.
//!
//! Bounds: at most [`MAX_ENTRIES`] buffers and a byte limit (default: a sixteenth of the
//! device memory, at most 1 GiB; `TESSERA_GPU_BUFFER_CACHE=BYTES` sets it, `0` turns the
//! cache off); the oldest entries are freed first when a new one does not fit. An
//! allocation that runs out of device memory frees the whole cache and tries once more.
//! While the context has streams besides the default one (a forked [`Gpu`](crate::Gpu),
//! cuSPARSE), dropped buffers are freed, not cached: another stream may still use them,
//! and cudarc's free waits for it.

use std::any::TypeId;

/// Most buffers a cache holds.
pub const MAX_ENTRIES: usize = 64;

/// What a cache entry is found by: the element type and the capacity in elements.
pub(crate) type Key = (TypeId, usize);

struct Entry<P> {
    key: Key,
    bytes: usize,
    payload: P,
}

/// Counters of a buffer cache ([`Gpu::buffer_cache_stats`](crate::Gpu::buffer_cache_stats)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BufferCacheStats {
    /// Buffers held now.
    pub buffers: usize,
    /// Bytes held now.
    pub bytes: usize,
    /// The byte limit.
    pub limit_bytes: usize,
    /// Allocations served from the cache.
    pub hits: u64,
    /// Allocations that went to the driver.
    pub misses: u64,
}

/// The bookkeeping of the cache, independent of CUDA (`P` is the buffer; the caller frees
/// what comes back from [`FreeList::put`] and [`FreeList::clear`]).
pub(crate) struct FreeList<P> {
    entries: Vec<Entry<P>>,
    bytes: usize,
    limit_bytes: usize,
    hits: u64,
    misses: u64,
}

impl<P> FreeList<P> {
    pub(crate) fn new(limit_bytes: usize) -> Self {
        FreeList {
            entries: Vec::new(),
            bytes: 0,
            limit_bytes,
            hits: 0,
            misses: 0,
        }
    }

    /// The most recently put buffer of `key`, if any (counted as a hit or a miss).
    pub(crate) fn take(&mut self, key: Key) -> Option<P> {
        match self.entries.iter().rposition(|e| e.key == key) {
            Some(i) => {
                let e = self.entries.remove(i);
                self.bytes -= e.bytes;
                self.hits += 1;
                Some(e.payload)
            }
            None => {
                self.misses += 1;
                None
            }
        }
    }

    /// Keep `payload` (`bytes` long) for a later [`FreeList::take`] of `key`. Returns what
    /// the caller must free now: the oldest entries that no longer fit, or `payload` itself
    /// when it alone exceeds the limit.
    pub(crate) fn put(&mut self, key: Key, bytes: usize, payload: P) -> Vec<P> {
        if bytes > self.limit_bytes {
            return vec![payload];
        }
        let out = self.evict_oldest(bytes, 1);
        self.entries.push(Entry {
            key,
            bytes,
            payload,
        });
        self.bytes += bytes;
        out
    }

    /// Everything held (for the caller to free), oldest first.
    pub(crate) fn clear(&mut self) -> Vec<P> {
        self.bytes = 0;
        self.entries.drain(..).map(|e| e.payload).collect()
    }

    /// Set the byte limit; returns the entries that no longer fit (oldest first).
    pub(crate) fn set_limit(&mut self, limit_bytes: usize) -> Vec<P> {
        self.limit_bytes = limit_bytes;
        self.evict_oldest(0, 0)
    }

    /// Remove the oldest entries until `bytes` more bytes and `entries` more entries fit
    /// the limits; returns them (oldest first).
    fn evict_oldest(&mut self, bytes: usize, entries: usize) -> Vec<P> {
        let mut n = 0;
        while n < self.entries.len()
            && (self.bytes + bytes > self.limit_bytes
                || self.entries.len() - n + entries > MAX_ENTRIES)
        {
            self.bytes -= self.entries[n].bytes;
            n += 1;
        }
        self.entries.drain(..n).map(|e| e.payload).collect()
    }

    pub(crate) fn stats(&self) -> BufferCacheStats {
        BufferCacheStats {
            buffers: self.entries.len(),
            bytes: self.bytes,
            limit_bytes: self.limit_bytes,
            hits: self.hits,
            misses: self.misses,
        }
    }
}

/// The default byte limit for a device of `total_mem` bytes, or the one
/// `TESSERA_GPU_BUFFER_CACHE` sets.
pub(crate) fn default_limit(total_mem: usize) -> usize {
    std::env::var("TESSERA_GPU_BUFFER_CACHE")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or((total_mem / 16).min(1 << 30))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(cap: usize) -> Key {
        (TypeId::of::<u32>(), cap)
    }

    #[test]
    fn take_finds_the_latest_buffer_of_its_type_and_capacity() {
        let mut f = FreeList::new(1000);
        assert!(f.put(k(10), 40, "a").is_empty());
        assert!(f.put(k(20), 80, "b").is_empty());
        assert!(f.put(k(10), 40, "c").is_empty());
        assert!(f.put((TypeId::of::<f32>(), 10), 40, "d").is_empty());
        assert_eq!(f.take(k(10)), Some("c"), "the most recently freed first");
        assert_eq!(f.take(k(10)), Some("a"));
        assert_eq!(f.take(k(10)), None, "no other capacity or type stands in");
        assert_eq!(f.take((TypeId::of::<f32>(), 10)), Some("d"));
        let s = f.stats();
        assert_eq!((s.buffers, s.bytes, s.hits, s.misses), (1, 80, 3, 1));
    }

    #[test]
    fn put_frees_the_oldest_entries_beyond_the_byte_limit() {
        let mut f = FreeList::new(100);
        assert!(f.put(k(1), 40, 1).is_empty());
        assert!(f.put(k(2), 40, 2).is_empty());
        assert_eq!(f.put(k(3), 40, 3), vec![1], "120 > 100: the oldest goes");
        assert_eq!(
            f.put(k(4), 100, 4),
            vec![2, 3],
            "room for the new one alone"
        );
        assert_eq!(
            f.put(k(5), 101, 5),
            vec![5],
            "larger than the limit: not kept"
        );
        assert_eq!(f.stats().bytes, 100);
        assert_eq!(f.set_limit(50), vec![4]);
        assert_eq!(f.stats().buffers, 0);
        let mut off = FreeList::new(0);
        assert_eq!(off.put(k(1), 4, 1), vec![1], "limit 0 keeps nothing");
    }

    #[test]
    fn put_holds_at_most_max_entries() {
        let mut f = FreeList::new(usize::MAX);
        for i in 0..MAX_ENTRIES {
            assert!(f.put(k(i), 1, i).is_empty());
        }
        assert_eq!(f.put(k(999), 1, 999), vec![0]);
        assert_eq!(f.stats().buffers, MAX_ENTRIES);
        assert_eq!(f.clear().len(), MAX_ENTRIES);
        assert_eq!(f.stats().bytes, 0);
    }
}
