//! GPU conformance tests of the runtime and the primitives against their CPU references.
//! Each needs a CUDA GPU (`#[ignore]`d; run on the device machine with
//! `../shared/tools/device-pack -p tessera-gpu`) and skips with a message when none is found.
//! Inputs are pseudo-random with fixed seeds; sizes 0, 1, 31, 33, 1000, 2^20 + 17, and one
//! above 2^27 for scan and sort. Set `TESSERA_REQUIRE_GPU=1` to make a missing GPU a failure.

use tessera_gpu::primitives::{cpu, SegOrder};
use tessera_gpu::{CompileOptions, Gpu, GpuError, LaunchConfig};

const SIZES: [usize; 6] = [0, 1, 31, 33, 1000, (1 << 20) + 17];
const BIG: usize = (1 << 27) + 12_345;

fn gpu() -> Option<Gpu> {
    match Gpu::probe() {
        Ok(g) => {
            eprintln!("running on {}", g.describe());
            Some(g)
        }
        Err(e) => {
            if std::env::var_os("TESSERA_REQUIRE_GPU").is_some() {
                panic!("TESSERA_REQUIRE_GPU is set but no GPU is usable: {e}");
            }
            eprintln!("skipped: no usable CUDA GPU ({e})");
            None
        }
    }
}

/// splitmix64: deterministic test data.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn first_mismatch<T: PartialEq + std::fmt::Debug>(what: &str, n: usize, got: &[T], want: &[T]) {
    assert_eq!(
        got.len(),
        want.len(),
        "{what} (n = {n}): length {} != reference {}",
        got.len(),
        want.len()
    );
    if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
        panic!(
            "{what} (n = {n}): first mismatch at index {i}: gpu {:?} != reference {:?}",
            got[i], want[i]
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn runtime_matches_reference() {
    let Some(g) = gpu() else { return };
    assert!(g.sm() >= 50, "sm {}", g.sm());
    // upload / download round trip, including empty buffers
    for n in SIZES {
        let mut r = Rng(n as u64 + 1);
        let v: Vec<u64> = (0..n).map(|_| r.next()).collect();
        let b = g.upload(&v).unwrap();
        assert_eq!(b.len(), n);
        first_mismatch("upload/download", n, &g.download(&b).unwrap(), &v);
        let z = g.zeros::<f64>(n).unwrap();
        assert!(
            g.download(&z).unwrap().iter().all(|&x| x == 0.0),
            "zeros (n = {n})"
        );
    }
    // compile, launch and time a kernel
    let src = r#"extern "C" __global__ void axpy(double a, const double* x, double* y, unsigned long long n) {
        unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
        if (i < n) y[i] = a * x[i] + y[i];
    }"#;
    let m = g.compile(src, &CompileOptions::named("axpy.cu")).unwrap();
    let k = m.function("axpy").unwrap();
    let n = 100_003usize;
    let x: Vec<f64> = (0..n).map(|i| i as f64 * 0.5).collect();
    let y: Vec<f64> = (0..n).map(|i| 1.0 - i as f64).collect();
    let (bx, by) = (g.upload(&x).unwrap(), g.upload(&y).unwrap());
    let (a, nn) = (3.0f64, n as u64);
    let ms = g
        .time_ms(|| {
            g.launch(&k, LaunchConfig::for_items(n, 256).unwrap())
                .arg(&a)
                .arg(&bx)
                .arg(&by)
                .arg(&nn)
                .run()
        })
        .unwrap();
    assert!(ms >= 0.0 && ms.is_finite());
    let out = g.download(&by).unwrap();
    for i in 0..n {
        assert_eq!(out[i], 3.0 * x[i] + y[i], "axpy at {i}");
    }
    // a second compile of the same source is served from the in-memory cache
    let m2 = g.compile(src, &CompileOptions::named("axpy.cu")).unwrap();
    assert_eq!(m.cache_key(), m2.cache_key());
    assert!(matches!(
        m.function("nope"),
        Err(GpuError::MissingKernel { .. })
    ));
    // compile errors carry the log and the options
    match g.compile(
        "extern \"C\" __global__ void bad() { undeclared_thing = 1; }",
        &CompileOptions::named("bad.cu"),
    ) {
        Err(GpuError::Compile { name, options, log }) => {
            assert_eq!(name, "bad.cu");
            assert!(
                options
                    .iter()
                    .any(|o| o.starts_with("--gpu-architecture=compute_")),
                "{options:?}"
            );
            assert!(log.contains("undeclared_thing"), "log: {log}");
        }
        other => panic!(
            "expected a compile error, got {:?}",
            other.map(|m| m.cache_key().to_string())
        ),
    }
    // PTX generated elsewhere loads through load_ptx
    let ptx = std::fs::read_to_string(
        tessera_gpu::compile::cache_dir()
            .unwrap()
            .join(format!("{}.ptx", m.cache_key())),
    )
    .expect("the compiled PTX is in the disk cache");
    let m3 = g.load_ptx(&ptx, "axpy.ptx").unwrap();
    m3.function("axpy").unwrap();
    let med = g
        .median_ms(5, 1, || {
            g.launch(&k, LaunchConfig::for_items(n, 256).unwrap())
                .arg(&a)
                .arg(&bx)
                .arg(&by)
                .arg(&nn)
                .run()
        })
        .unwrap();
    assert!(med.is_finite());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn scan_matches_reference() {
    let Some(g) = gpu() else { return };
    let p = g.primitives().unwrap();
    for n in SIZES.iter().copied().chain([BIG]) {
        let mut r = Rng(0x5ca1 + n as u64);
        let v: Vec<u32> = (0..n).map(|_| r.below(1000) as u32).collect();
        let b = g.upload(&v).unwrap();
        first_mismatch(
            "exclusive scan u32",
            n,
            &g.download(&p.exclusive_scan(&b).unwrap()).unwrap(),
            &cpu::exclusive_scan_u32(&v),
        );
        first_mismatch(
            "inclusive scan u32",
            n,
            &g.download(&p.inclusive_scan(&b).unwrap()).unwrap(),
            &cpu::inclusive_scan_u32(&v),
        );
        if n <= SIZES[5] {
            // wrapping u32 and u64 with full-range values
            let w: Vec<u32> = (0..n).map(|_| r.next() as u32).collect();
            let bw = g.upload(&w).unwrap();
            first_mismatch(
                "exclusive scan u32 (wrapping)",
                n,
                &g.download(&p.exclusive_scan(&bw).unwrap()).unwrap(),
                &cpu::exclusive_scan_u32(&w),
            );
            let w64: Vec<u64> = (0..n).map(|_| r.next()).collect();
            let b64 = g.upload(&w64).unwrap();
            first_mismatch(
                "exclusive scan u64",
                n,
                &g.download(&p.exclusive_scan(&b64).unwrap()).unwrap(),
                &cpu::exclusive_scan_u64(&w64),
            );
            first_mismatch(
                "inclusive scan u64",
                n,
                &g.download(&p.inclusive_scan(&b64).unwrap()).unwrap(),
                &cpu::inclusive_scan_u64(&w64),
            );
            let mut ip = g.upload(&w64).unwrap();
            p.inclusive_scan_in_place(&mut ip).unwrap();
            first_mismatch(
                "in-place inclusive scan u64",
                n,
                &g.download(&ip).unwrap(),
                &cpu::inclusive_scan_u64(&w64),
            );
            // ragged row lengths -> CSR offsets
            let counts: Vec<u32> = (0..n)
                .map(|_| {
                    if r.below(7) == 0 {
                        r.below(200) as u32
                    } else {
                        r.below(4) as u32
                    }
                })
                .collect();
            let bc = g.upload(&counts).unwrap();
            first_mismatch(
                "offsets_from_counts",
                n,
                &g.download(&p.offsets_from_counts(&bc).unwrap()).unwrap(),
                &cpu::offsets_from_counts(&counts).unwrap(),
            );
        }
    }
    // overflow of 32-bit offsets is an error, not a wrong answer
    let huge = g.upload(&[u32::MAX, 1]).unwrap();
    assert!(p.offsets_from_counts(&huge).is_err());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn reduce_matches_reference() {
    let Some(g) = gpu() else { return };
    let p = g.primitives().unwrap();
    for n in SIZES {
        let mut r = Rng(0x7ed + n as u64);
        let v: Vec<u32> = (0..n).map(|_| r.next() as u32).collect();
        let b = g.upload(&v).unwrap();
        assert_eq!(
            p.reduce_sum_u32(&b).unwrap(),
            cpu::reduce_sum_u32(&v),
            "sum u32 (n = {n})"
        );
        assert_eq!(
            p.reduce_max_u32(&b).unwrap(),
            cpu::reduce_max_u32(&v),
            "max u32 (n = {n})"
        );
        let w: Vec<u64> = (0..n).map(|_| r.next()).collect();
        assert_eq!(
            p.reduce_sum_u64(&g.upload(&w).unwrap()).unwrap(),
            cpu::reduce_sum_u64(&w),
            "sum u64 (n = {n})"
        );
        let f: Vec<f64> = (0..n)
            .map(|_| (r.next() >> 11) as f64 / (1u64 << 53) as f64 - 0.25)
            .collect();
        let got = p.reduce_sum_f64(&g.upload(&f).unwrap()).unwrap();
        let want = cpu::reduce_sum_f64(&f);
        let scale: f64 = f.iter().map(|x| x.abs()).sum::<f64>().max(1e-300);
        // tolerance: a pairwise/tree sum of n doubles errs by at most ~log2(n) eps sum|x|
        assert!(
            (got - want).abs() <= 64.0 * f64::EPSILON * scale,
            "sum f64 (n = {n}): gpu {got} vs reference {want}"
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn compact_matches_reference() {
    let Some(g) = gpu() else { return };
    let p = g.primitives().unwrap();
    for n in SIZES {
        for density in [0u64, 1, 50, 100] {
            let mut r = Rng(0xc0 + n as u64 * 7 + density);
            // flags are arbitrary non-zero values where set, to check normalisation
            let flags: Vec<u32> = (0..n)
                .map(|_| {
                    if r.below(100) < density {
                        1 + r.below(5) as u32
                    } else {
                        0
                    }
                })
                .collect();
            let v32: Vec<i32> = (0..n).map(|_| r.next() as i32).collect();
            let v64: Vec<f64> = (0..n).map(|i| i as f64 * 1.5).collect();
            let bf = g.upload(&flags).unwrap();
            let what = format!("compact i32 density {density}%");
            first_mismatch(
                &what,
                n,
                &g.download(&p.compact(&g.upload(&v32).unwrap(), &bf).unwrap())
                    .unwrap(),
                &cpu::compact(&v32, &flags),
            );
            let what = format!("compact f64 density {density}%");
            first_mismatch(
                &what,
                n,
                &g.download(&p.compact(&g.upload(&v64).unwrap(), &bf).unwrap())
                    .unwrap(),
                &cpu::compact(&v64, &flags),
            );
            first_mismatch(
                "compact_indices",
                n,
                &g.download(&p.compact_indices(&bf).unwrap()).unwrap(),
                &cpu::compact_indices(&flags),
            );
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn histogram_matches_reference() {
    let Some(g) = gpu() else { return };
    let p = g.primitives().unwrap();
    for n in SIZES {
        for nbins in [1u32, 37, 4096, 12 * 1024, 100_000] {
            let mut r = Rng(0x4157 + n as u64 + nbins as u64);
            // some keys out of range (ignored), skewed distribution (hot bins)
            let keys: Vec<u32> = (0..n)
                .map(|_| {
                    if r.below(4) == 0 {
                        r.below(8) as u32
                    } else {
                        r.below(nbins as u64 + nbins as u64 / 10 + 1) as u32
                    }
                })
                .collect();
            let got = g
                .download(&p.histogram(&g.upload(&keys).unwrap(), nbins).unwrap())
                .unwrap();
            first_mismatch(
                &format!("histogram with {nbins} bins"),
                n,
                &got,
                &cpu::histogram(&keys, nbins),
            );
        }
    }
}

/// Check a stable sort with values = original indices without a CPU sort: keys ascending,
/// key[i] == original[value[i]], values a permutation, equal keys in increasing value order.
fn check_stable_sort_by_index<K: Ord + Copy + std::fmt::Debug>(
    what: &str,
    orig: &[K],
    keys: &[K],
    vals: &[u32],
) {
    let n = orig.len();
    assert_eq!(keys.len(), n, "{what}: key count");
    assert_eq!(vals.len(), n, "{what}: value count");
    let mut seen = vec![false; n];
    for i in 0..n {
        let v = vals[i] as usize;
        assert!(
            v < n && !seen[v],
            "{what} (n = {n}): value {v} at {i} repeated or out of range"
        );
        seen[v] = true;
        assert_eq!(
            keys[i], orig[v],
            "{what} (n = {n}): key at {i} does not belong to its value {v}"
        );
        if i > 0 {
            assert!(
                keys[i - 1] <= keys[i],
                "{what} (n = {n}): keys out of order at {i}: {:?} > {:?}",
                keys[i - 1],
                keys[i]
            );
            if keys[i - 1] == keys[i] {
                assert!(vals[i - 1] < vals[i], "{what} (n = {n}): not stable at {i}");
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn radix_sort_matches_reference() {
    let Some(g) = gpu() else { return };
    let p = g.primitives().unwrap();
    for n in SIZES.iter().copied().chain([BIG]) {
        let mut r = Rng(0x5047 + n as u64);
        // many duplicates (stability) in the big case, full range otherwise
        let range = if n == BIG { 1u64 << 20 } else { 1u64 << 32 };
        let k32: Vec<u32> = (0..n).map(|_| r.below(range) as u32).collect();
        let mut bk = g.upload(&k32).unwrap();
        let mut bv = p.iota(n, 0).unwrap();
        p.radix_sort(&mut bk, Some(&mut bv), None).unwrap();
        let (gk, gv) = (g.download(&bk).unwrap(), g.download(&bv).unwrap());
        check_stable_sort_by_index("radix sort u32 pairs", &k32, &gk, &gv);
        if n == BIG {
            continue;
        }
        let idx: Vec<u32> = (0..n as u32).collect();
        let (wk, wv) = cpu::sort_pairs(&k32, &idx);
        first_mismatch("radix sort u32 keys", n, &gk, &wk);
        first_mismatch("radix sort u32 values", n, &gv, &wv);
        // u64 keys with duplicates, values carried
        let k64: Vec<u64> = (0..n).map(|_| r.next() >> (r.below(60) as u32)).collect();
        let mut bk = g.upload(&k64).unwrap();
        let mut bv = p.iota(n, 0).unwrap();
        p.radix_sort(&mut bk, Some(&mut bv), None).unwrap();
        let (wk, wv) = cpu::sort_pairs(&k64, &idx);
        first_mismatch("radix sort u64 keys", n, &g.download(&bk).unwrap(), &wk);
        first_mismatch("radix sort u64 values", n, &g.download(&bv).unwrap(), &wv);
        // keys only, restricted bits (odd number of passes: 24 bits -> 3 passes)
        let k24: Vec<u32> = (0..n).map(|_| r.below(1 << 24) as u32).collect();
        let mut bk = g.upload(&k24).unwrap();
        p.radix_sort_keys(&mut bk, Some(24)).unwrap();
        let mut want = k24.clone();
        want.sort_unstable();
        first_mismatch(
            "radix sort u32 keys (24 bits)",
            n,
            &g.download(&bk).unwrap(),
            &want,
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn segmented_sort_matches_reference() {
    let Some(g) = gpu() else { return };
    let p = g.primitives().unwrap();
    for nrows in SIZES {
        for long in [0u32, 1000, 5000] {
            let mut r = Rng(0x5e6 + nrows as u64 + long as u64);
            // ragged rows: mostly 0..12 entries, a few up to 40, and (long) one of 1000 with
            // rows of 65 and 300 (block per row), or one of 5000 (the radix path)
            let mut counts: Vec<u32> = (0..nrows)
                .map(|_| {
                    if r.below(10) == 0 {
                        r.below(41) as u32
                    } else {
                        r.below(13) as u32
                    }
                })
                .collect();
            if long > 0 && nrows > 0 {
                counts[nrows / 3] = 65;
                counts[nrows / 5] = 300;
                counts[nrows / 2] = long;
            }
            let offsets = cpu::offsets_from_counts(&counts).unwrap();
            let nnz = *offsets.last().unwrap() as usize;
            for order in [SegOrder::Unsigned, SegOrder::Signed, SegOrder::TcsrColumn] {
                let vals: Vec<u32> = (0..nnz)
                    .map(|_| r.next() as u32 >> (r.below(20) as u32))
                    .collect();
                let vals: Vec<u32> = if order == SegOrder::Signed || order == SegOrder::TcsrColumn {
                    vals.iter()
                        .map(|&v| if r.below(2) == 0 { !v } else { v })
                        .collect()
                } else {
                    vals
                };
                let mut bv = g.upload(&vals).unwrap();
                let bo = g.upload(&offsets).unwrap();
                p.segmented_sort(&mut bv, &bo, order).unwrap();
                let mut want = vals.clone();
                cpu::segmented_sort(&mut want, &offsets, order);
                first_mismatch(
                    &format!("segmented sort {order:?} (long row: {long})"),
                    nrows,
                    &g.download(&bv).unwrap(),
                    &want,
                );
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn unique_matches_reference() {
    let Some(g) = gpu() else { return };
    let p = g.primitives().unwrap();
    for n in SIZES {
        let mut r = Rng(0x0417 + n as u64);
        let mut k: Vec<u32> = (0..n)
            .map(|_| r.below((n as u64 / 3).max(1)) as u32)
            .collect();
        k.sort_unstable();
        let (u, ids) = p.unique_with_ids(&g.upload(&k).unwrap()).unwrap();
        let (wu, wids) = cpu::unique_with_ids(&k);
        first_mismatch("unique u32", n, &g.download(&u).unwrap(), &wu);
        first_mismatch("unique u32 ids", n, &g.download(&ids).unwrap(), &wids);
        let mut k64: Vec<u64> = (0..n)
            .map(|_| r.below(1 << 40) | if r.below(2) == 0 { 0 } else { 1 << 40 })
            .collect();
        k64.sort_unstable();
        // duplicate every element once more
        let k64: Vec<u64> = k64.iter().flat_map(|&x| [x, x]).collect();
        let u = p.unique(&g.upload(&k64).unwrap()).unwrap();
        first_mismatch(
            "unique u64",
            n,
            &g.download(&u).unwrap(),
            &cpu::unique_with_ids(&k64).0,
        );
    }
}

/// NCCL with a communicator of one rank on device 0: an all-reduce (the sum over one rank is
/// the input) and a grouped send/receive to itself of two segments. Skips with a message when
/// there is no GPU or no `libnccl.so.2` (set `TESSERA_REQUIRE_NCCL=1` to make that a failure).
#[test]
#[ignore = "needs a CUDA GPU"]
fn nccl_one_rank_all_reduce_and_self_send_recv() {
    use tessera_gpu::{NcclComm, NcclLibrary};
    let Some(g) = gpu() else { return };
    let lib = match NcclLibrary::load() {
        Ok(l) => l,
        Err(e) => {
            assert!(matches!(e, GpuError::NoNccl(_)), "{e}");
            if std::env::var_os("TESSERA_REQUIRE_NCCL").is_some() {
                panic!("TESSERA_REQUIRE_NCCL is set: {e}");
            }
            eprintln!("skipped: {e}");
            return;
        }
    };
    eprintln!("NCCL {} from {}", lib.version_string(), lib.path());
    assert_eq!(std::env::var("NCCL_NVLS_ENABLE").as_deref(), Ok("0"));
    let comm = NcclComm::new(&[&g]).unwrap();
    assert_eq!(comm.ranks(), 1);
    assert_eq!(comm.devices(), &[g.ordinal()]);
    let mut rng = Rng(21);
    let n = 1000;
    let host: Vec<f64> = (0..n)
        .map(|_| rng.below(1 << 20) as f64 / 7.0 - 1000.0)
        .collect();
    let send = g.upload(&host).unwrap();
    let mut recv = g.zeros::<f64>(n).unwrap();
    comm.all_reduce_sum(&[&send], &mut [&mut recv]).unwrap();
    assert_eq!(g.download(&recv).unwrap(), host, "all-reduce over one rank");
    // self send/receive of two segments, received swapped: [a | b] -> [b | a]
    let mut out = g.zeros::<f64>(n).unwrap();
    let tr = |from: std::ops::Range<usize>, to_at| tessera_gpu::Transfer {
        from_buf: 0,
        from,
        to_buf: 0,
        to_at,
    };
    comm.exchange(
        &[(0, &send)],
        &mut [(0, &mut out)],
        &[tr(0..300, n - 300), tr(300..n, 0)],
    )
    .unwrap();
    let got = g.download(&out).unwrap();
    assert_eq!(&got[n - 300..], &host[..300]);
    assert_eq!(&got[..n - 300], &host[300..]);
    // a transfer beyond its buffer is an error before anything is posted
    assert!(comm
        .exchange(&[(0, &send)], &mut [(0, &mut out)], &[tr(0..300, n - 299)])
        .is_err());
    // a duplicated device is refused before NCCL sees it
    let e = NcclComm::new(&[&g, &g]).unwrap_err().to_string();
    assert!(e.contains("appears twice"), "{e}");
}

/// A second stream on one device: a copy ordered after an event of the first stream.
#[test]
#[ignore = "needs a CUDA GPU"]
fn forked_stream_waits_for_event() {
    let Some(g) = gpu() else { return };
    let side = g.fork_stream().unwrap();
    let host: Vec<f64> = (0..100_000).map(|i| i as f64).collect();
    let a = g.upload(&host).unwrap();
    let ev = g.new_event().unwrap();
    ev.record(&g).unwrap();
    side.wait_event(&ev).unwrap();
    let mut b = side.zeros::<f64>(host.len()).unwrap();
    side.copy_device_range(&a, 10, &mut b, 0, host.len() - 10)
        .unwrap();
    side.synchronize().unwrap();
    let got = side.download(&b).unwrap();
    assert_eq!(&got[..host.len() - 10], &host[10..]);
}

/// Host cost of the runtime calls a standalone mesh op makes (medians of 200 calls, µs):
/// allocation and free, launches (plain and cooperative), small downloads, synchronisation,
/// the mapped flag's clear-launch-synchronise-read. Prints; asserts only the flag's values.
#[test]
#[ignore = "needs a CUDA device"]
fn runtime_call_costs() {
    let Some(g) = gpu() else { return };
    let m = g
        .compile(
            "extern \"C\" __global__ void nop(unsigned* p) { if (p && threadIdx.x == 1024) p[0] = 1; }",
            &CompileOptions::named("nop.cu"),
        )
        .unwrap();
    let nop = m.function("nop").unwrap();
    let flag = g.zeros::<u32>(1).unwrap();
    let mut pinned = g.alloc_pinned::<u32>(1).unwrap();
    let cost = |name: &str, f: &mut dyn FnMut()| {
        for _ in 0..20 {
            f();
        }
        g.synchronize().unwrap();
        let mut v = Vec::new();
        for _ in 0..200 {
            let t = std::time::Instant::now();
            f();
            v.push(t.elapsed().as_secs_f64() * 1e6);
        }
        g.synchronize().unwrap();
        eprintln!("{name:<44} {:>8.2} µs", tessera_gpu::median(&mut v));
    };
    cost("alloc 1M u32 + drop (cache of freed buffers)", &mut || {
        drop(g.alloc::<u32>(1 << 20).unwrap())
    });
    let limit = g.buffer_cache_stats().limit_bytes;
    g.set_buffer_cache_limit(0);
    cost("alloc 1M u32 + drop (no cache)", &mut || {
        drop(g.alloc::<u32>(1 << 20).unwrap())
    });
    cost("zeros(1) + drop (no cache)", &mut || {
        drop(g.zeros::<u32>(1).unwrap())
    });
    let mut keep = Vec::new();
    cost("alloc 1M u32, kept (no cache)", &mut || {
        keep.push(g.alloc::<u32>(1 << 20).unwrap())
    });
    cost("drop of one kept 1M buffer (no cache)", &mut || {
        drop(keep.pop())
    });
    g.set_buffer_cache_limit(limit);
    cost("module.function lookup", &mut || {
        drop(m.function("nop").unwrap())
    });
    cost("launch nop (1 block)", &mut || {
        g.launch(&nop, LaunchConfig::blocks(1, 32))
            .arg(&flag)
            .run()
            .unwrap()
    });
    cost("cooperative launch nop (1 block)", &mut || {
        g.launch(&nop, LaunchConfig::blocks(1, 32))
            .arg(&flag)
            .run_cooperative()
            .unwrap()
    });
    cost("cooperative launch nop (528 blocks)", &mut || {
        g.launch(&nop, LaunchConfig::blocks(528, 256))
            .arg(&flag)
            .run_cooperative()
            .unwrap()
    });
    cost("synchronize (idle)", &mut || g.synchronize().unwrap());
    cost("download_at 1 u32 (pageable)", &mut || {
        let _ = g.download_at(&flag, 0).unwrap();
    });
    cost("download_pinned 1 u32", &mut || {
        g.download_pinned(&flag, &mut pinned).unwrap()
    });
    let hf = g.host_words(1).unwrap();
    cost(
        "host flag: clear, launch nop, synchronize, read",
        &mut || {
            hf.clear();
            g.launch(&nop, LaunchConfig::blocks(1, 32))
                .arg(&hf)
                .run()
                .unwrap();
            g.synchronize().unwrap();
            assert_eq!(hf.get(0), 0);
        },
    );
    cost("launch nop + synchronize", &mut || {
        g.launch(&nop, LaunchConfig::blocks(1, 32))
            .arg(&flag)
            .run()
            .unwrap();
        g.synchronize().unwrap()
    });
    // the launch alone: a null pointer for an argument (no buffer), ten arguments, and the same
    // on a stream of its own (non-blocking; from here on the context tracks buffers' events
    // across streams, so this comes last)
    let null = 0u64;
    cost("launch nop (1 block), null argument", &mut || {
        g.launch(&nop, LaunchConfig::blocks(1, 32))
            .arg(&null)
            .run()
            .unwrap()
    });
    let m10 = g
        .compile(
            "extern \"C\" __global__ void nop10(unsigned* a, unsigned* b, unsigned* c, unsigned* d, unsigned* e, unsigned* f, unsigned* g, unsigned* h, unsigned long long n, unsigned* p) { if (p && threadIdx.x == 1024) p[0] = (unsigned)n; }",
            &CompileOptions::named("nop10.cu"),
        )
        .unwrap();
    let nop10 = m10.function("nop10").unwrap();
    cost("launch nop (1 block), 10 arguments (buffers)", &mut || {
        let mut l = g.launch(&nop10, LaunchConfig::blocks(1, 32));
        for _ in 0..8 {
            l = l.arg(&flag);
        }
        l.arg(&null).arg(&flag).run().unwrap()
    });
    let side = g.fork_stream().unwrap();
    cost(
        "launch nop (1 block), null argument, own stream",
        &mut || {
            side.launch(&nop, LaunchConfig::blocks(1, 32))
                .arg(&null)
                .run()
                .unwrap()
        },
    );
    side.synchronize().unwrap();
    cost(
        "launch nop (1 block), null argument, after the fork",
        &mut || {
            g.launch(&nop, LaunchConfig::blocks(1, 32))
                .arg(&null)
                .run()
                .unwrap()
        },
    );
}

/// Mapped host words ([`Gpu::host_words`]): written by a kernel's plain stores through their
/// device address, read by the host after a synchronisation, cleared by the host, and left
/// alone by a launch that does not write them.
#[test]
#[ignore = "needs a CUDA GPU"]
fn host_words_written_by_kernel_and_cleared_by_host() {
    let Some(g) = gpu() else { return };
    let m = g
        .compile(
            "extern \"C\" __global__ void raise_if(unsigned* f, unsigned at, unsigned v) { if (blockIdx.x * blockDim.x + threadIdx.x == at) { f[0] = v; f[2] = v + 1; } }",
            &CompileOptions::named("host_flag_test.cu"),
        )
        .unwrap();
    let k = m.function("raise_if").unwrap();
    let f = g.host_words(3).unwrap();
    assert_eq!(
        (f.len(), f.get(0), f.get(1), f.get(2)),
        (3, 0, 0, 0),
        "new words are clear"
    );
    for (at, v, want) in [(5_000u32, 7u32, 7u32), (1 << 30, 9, 0), (0, 1, 1)] {
        f.clear();
        g.launch(&k, LaunchConfig::blocks(64, 128))
            .arg(&f)
            .arg(&at)
            .arg(&v)
            .run()
            .unwrap();
        g.synchronize().unwrap();
        let want2 = if want == 0 { 0 } else { want + 1 };
        assert_eq!(
            (f.get(0), f.get(1), f.get(2)),
            (want, 0, want2),
            "thread {at} stores {v}"
        );
        assert_eq!(f.get(3), 0, "past the end");
    }
}

/// [`Gpu::wait_word`] returns once a kernel has marked its words final, before the launch ends:
/// block 0 writes word 0, fences, then marks word 1, while block 1 runs until the host answers
/// through word 2 (or gives up after about a second and says so in word 3, so that a wait for
/// the launch's end fails here instead of hanging). A launch that never marks the word makes
/// the wait return `false` once the stream is idle; a word past the end is refused.
#[test]
#[ignore = "needs a CUDA GPU"]
fn wait_word_returns_before_the_launch_ends() {
    let Some(g) = gpu() else { return };
    let m = g
        .compile(
            r#"extern "C" __global__ void mark_then_wait(unsigned* w, unsigned v, unsigned mark) {
                if (threadIdx.x != 0) return;
                if (blockIdx.x == 0) {
                    w[0] = v;
                    __threadfence_system();
                    if (mark) *(volatile unsigned*)(w + 1) = 1u;
                } else if (mark) {
                    const long long t0 = clock64();
                    while (*(volatile unsigned*)(w + 2) == 0u) {
                        if (clock64() - t0 > 2000000000ll) { w[3] = 1u; return; }
                    }
                }
            }"#,
            &CompileOptions::named("wait_word_test.cu"),
        )
        .unwrap();
    let k = m.function("mark_then_wait").unwrap();
    let w = g.host_words(4).unwrap();
    for v in [7u32, 11] {
        w.clear();
        g.launch(&k, LaunchConfig::blocks(2, 32))
            .arg(&w)
            .arg(&v)
            .arg(&1u32)
            .run()
            .unwrap();
        assert!(g.wait_word(&w, 1).unwrap(), "marked");
        assert_eq!(w.get(0), v, "the word before the mark");
        // block 1 is still running: it ends once the host answers
        w.set(2, 1);
        g.synchronize().unwrap();
        assert_eq!(w.get(3), 0, "the wait returned before the launch ended");
    }
    w.clear();
    g.launch(&k, LaunchConfig::blocks(2, 32))
        .arg(&w)
        .arg(&5u32)
        .arg(&0u32)
        .run()
        .unwrap();
    assert!(!g.wait_word(&w, 1).unwrap(), "never marked");
    assert_eq!(w.get(0), 5);
    assert!(g.wait_word(&w, 4).is_err(), "past the end");
}

/// Buffers dropped on a thread that never used the device free with the context bound
/// there (cudarc's free does not bind it): without that, the free fails with
/// `CUDA_ERROR_INVALID_CONTEXT`, cudarc keeps the error, and the next call of the context
/// on any thread returns it.
#[test]
#[ignore = "needs a CUDA GPU"]
fn buffers_dropped_on_a_fresh_thread_leave_the_device_usable() {
    let Some(g) = gpu() else { return };
    // rounds 0-2 free the buffers (no cache of freed buffers); rounds 3-5 put them into
    // the cache, whose limit then frees the older ones on that thread
    for round in 0..6 {
        g.set_buffer_cache_limit(if round < 3 { 0 } else { 8192 });
        let dev = g.upload(&[1u32, 2, 3, 4]).unwrap();
        let zeros = g.zeros::<f64>(1000).unwrap();
        let pinned = g.alloc_pinned::<u32>(16).unwrap();
        std::thread::spawn(move || {
            drop(dev);
            drop(zeros);
            drop(pinned);
        })
        .join()
        .unwrap();
        // the next calls on this thread (and on a fresh thread) see no kept error
        let b = g.upload(&[5u32, 6, 7]).unwrap();
        assert_eq!(g.download(&b).unwrap(), vec![5, 6, 7], "round {round}");
        let g2 = &g;
        std::thread::scope(|s| {
            s.spawn(move || {
                let c = g2.upload(&[8i32, 9]).unwrap();
                assert_eq!(
                    g2.download(&c).unwrap(),
                    vec![8, 9],
                    "round {round}, other thread"
                );
            });
        });
    }
}

/// The cache of freed buffers: a dropped buffer is reused by the next allocation of its
/// element type and capacity on the same `Gpu` (no other type or capacity stands in), with
/// `zeros`, `upload` and `duplicate` giving the contents they promise; the byte limit, a
/// trim, and a second stream on the context (buffers then freed, not cached) are honoured.
#[test]
#[ignore = "needs a CUDA GPU"]
fn freed_buffers_are_reused_by_allocations_of_their_type_and_capacity() {
    let Some(g) = gpu() else { return };
    g.set_buffer_cache_limit(1 << 20);
    g.trim_buffer_cache();
    let s0 = g.buffer_cache_stats();
    assert_eq!((s0.buffers, s0.bytes, s0.limit_bytes), (0, 0, 1 << 20));
    let a = g.upload(&(0..1000u32).collect::<Vec<_>>()).unwrap();
    drop(a);
    let s1 = g.buffer_cache_stats();
    assert_eq!(
        (s1.buffers, s1.bytes),
        (1, 4000),
        "the dropped buffer is kept"
    );
    // another type or capacity is not served from it
    let f = g.alloc::<f32>(1000).unwrap();
    let u = g.alloc::<u32>(999).unwrap();
    assert_eq!(g.buffer_cache_stats().hits, s1.hits);
    // zeros over a reused allocation is zeros
    let z = g.zeros::<u32>(1000).unwrap();
    let s2 = g.buffer_cache_stats();
    assert_eq!((s2.hits, s2.buffers), (s1.hits + 1, 0), "zeros reused it");
    assert!(g.download(&z).unwrap().iter().all(|&x| x == 0));
    // upload and duplicate over reused allocations
    drop(z);
    let up = g.upload(&(0..1000u32).rev().collect::<Vec<_>>()).unwrap();
    assert_eq!(g.buffer_cache_stats().hits, s2.hits + 1);
    let want: Vec<u32> = (0..1000u32).rev().collect();
    assert_eq!(g.download(&up).unwrap(), want);
    drop(u);
    drop(f);
    let spare = g.alloc::<u32>(1000).unwrap();
    drop(spare);
    let dup = g.duplicate(&up).unwrap();
    assert_eq!(
        g.download(&dup).unwrap(),
        want,
        "duplicate into a reused buffer"
    );
    // the byte limit: a buffer over it is freed, and older entries make room
    let big = g.alloc::<u8>(2 << 20).unwrap();
    let before = g.buffer_cache_stats().buffers;
    drop(big);
    assert_eq!(
        g.buffer_cache_stats().buffers,
        before,
        "over the limit: freed"
    );
    g.trim_buffer_cache();
    assert_eq!(g.buffer_cache_stats().bytes, 0);
    // a second stream on the context: dropped buffers are freed, not cached
    let other = g.fork_stream().unwrap();
    drop(g.alloc::<u32>(64).unwrap());
    assert_eq!(
        g.buffer_cache_stats().buffers,
        0,
        "freed while two streams exist"
    );
    drop(other);
    drop(g.alloc::<u32>(64).unwrap());
    assert_eq!(
        g.buffer_cache_stats().buffers,
        1,
        "cached again with one stream"
    );
    drop((dup, up));
    // a buffer that outlives its Gpu is freed, not cached
    let g2 = tessera_gpu::Gpu::new(0).unwrap();
    let orphan = g2.upload(&[1u32, 2, 3]).unwrap();
    drop(g2);
    drop(orphan);
    let b = g.upload(&[4u32]).unwrap();
    assert_eq!(g.download(&b).unwrap(), vec![4]);
}

/// The radix sort at the sizes of the GPU simplex derivation on dragon-817k (4.9 M edge
/// keys of 36 bits, 3.3 M face keys of 54 bits, u32 values carried): median of 15 CUDA-event
/// runs, and the bytes-moved floor of its passes (per pass: the count reads the keys, the
/// scatter reads and writes keys and values) at 3 TB/s. Prints only; the conformance is
/// `radix_sort_matches_reference`.
#[test]
#[ignore = "needs a CUDA GPU"]
fn radix_sort_timing() {
    let Some(g) = gpu() else { return };
    let p = g.primitives().unwrap();
    for (n, bits) in [(4_900_000usize, 36u32), (3_300_000, 54)] {
        let mut r = Rng(0x7ad1 + n as u64);
        let keys: Vec<u64> = (0..n).map(|_| r.next() & ((1u64 << bits) - 1)).collect();
        let mut times = Vec::new();
        for run in 0..18 {
            let mut bk = g.upload(&keys).unwrap();
            let mut bv = p.iota(n, 0).unwrap();
            g.synchronize().unwrap();
            let ms = g
                .time_ms(|| p.radix_sort(&mut bk, Some(&mut bv), Some(bits)))
                .unwrap();
            if run >= 3 {
                times.push(ms as f64);
            }
            if run == 0 {
                let got = g.download(&bk).unwrap();
                assert!(
                    got.windows(2).all(|w| w[0] <= w[1]),
                    "radix sort: keys out of order"
                );
            }
        }
        let ms = tessera_gpu::median(&mut times);
        let passes = bits.div_ceil(8) as f64;
        let bytes = passes * n as f64 * (8.0 + 2.0 * (8.0 + 4.0));
        println!(
            "radix sort {n} u64 keys ({bits} bits, {passes} passes) + u32 values: {ms:.3} ms, {:.3} ms a pass, floor {:.3} ms ({:.1} % of 3 TB/s)",
            ms / passes,
            bytes / 3e12 * 1e3,
            bytes / (ms * 1e-3) / 3e12 * 100.0
        );
    }
}
