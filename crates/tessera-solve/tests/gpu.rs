//! GPU conformance of the solver kernels against the CPU reference: Bin-BCSR* SpMV
//! (dissertation Listing 4.1). All tests need a CUDA GPU and skip cleanly without one.

use tessera_core::Par;
use tessera_gpu::Gpu;
use tessera_solve::cuda::{DeviceBinBcsr, GpuScalar, SolveKernels};
use tessera_sparse::binbcsr::{BinBcsr, BinBcsrPattern};

fn gpu() -> Option<Gpu> {
    match Gpu::probe() {
        Ok(g) => Some(g),
        Err(e) => {
            eprintln!("skipping: no CUDA GPU ({e})");
            None
        }
    }
}

struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 11
    }
    fn f(&mut self) -> f64 {
        (self.next() as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    }
}

fn spmv_case<T: GpuScalar>(
    gpu: &Gpu,
    k: &SolveKernels<'_>,
    e: usize,
    n: usize,
    seed: u64,
    tol: f64,
) {
    let mut g = Lcg(seed);
    // random sorted rows with varied lengths (some empty, some long)
    let rows: Vec<Vec<u32>> = (0..n)
        .map(|i| {
            let len = (g.next() % if i % 97 == 0 { 150 } else { 20 }) as usize;
            let mut r: Vec<u32> = (0..len)
                .map(|_| (g.next() % n as u64) as u32)
                .filter(|&c| c as usize != i)
                .collect();
            r.sort_unstable();
            r.dedup();
            r
        })
        .collect();
    let p = std::sync::Arc::new(BinBcsrPattern::from_rows(e, &rows).unwrap());
    let mut m = BinBcsr::<T>::zeros(p.clone());
    {
        let (vals, diag) = m.values_diag_mut();
        for v in vals.iter_mut().chain(diag.iter_mut()) {
            *v = T::from_f64(g.f());
        }
    }
    let x: Vec<T> = (0..n * e).map(|_| T::from_f64(g.f())).collect();
    let mut y_cpu = vec![T::ZERO; n * e];
    m.spmv(Par::Rayon, &x, &mut y_cpu).unwrap();
    let dm = DeviceBinBcsr::upload(gpu, &m).unwrap();
    let xd = gpu.upload(&x).unwrap();
    let mut yd = gpu.zeros::<T>(n * e).unwrap();
    dm.spmv(k, &xd, &mut yd).unwrap();
    let y = gpu.download(&yd).unwrap();
    let scale = y_cpu.iter().fold(0.0f64, |s, v| s.max(v.to_f64().abs()));
    let err = y
        .iter()
        .zip(&y_cpu)
        .fold(0.0f64, |s, (a, b)| s.max((a.to_f64() - b.to_f64()).abs()));
    println!(
        "spmv {} e={e} n={n}: max rel diff {:.3e}",
        T::NAME,
        err / scale
    );
    assert!(
        err <= tol * scale,
        "{} e = {e}: {err:e} > {tol:e} * {scale:e}",
        T::NAME
    );
    // round trip of the device matrix
    let back = dm.download(gpu).unwrap();
    assert_eq!(back.pattern(), m.pattern());
    assert_eq!(back.values(), m.values());
    assert_eq!(back.diag(), m.diag());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn binbcsr_spmv_matches_reference() {
    let Some(gpu) = gpu() else { return };
    let k = SolveKernels::new(&gpu).unwrap();
    for e in 1..=3 {
        for (n, seed) in [(1usize, 1u64), (31, 2), (1000, 3), (4133, 4)] {
            spmv_case::<f32>(&gpu, &k, e, n, seed, 1e-5);
            spmv_case::<f64>(&gpu, &k, e, n, seed, 1e-12);
        }
    }
}

// ----------------------------------------------------------------------------- setup products

use tessera_solve::amg::{galerkin, inverse_diagonal, smooth_prolongator};
use tessera_solve::blockcsr::BlockCsr;
use tessera_solve::cuda::{
    block_spgemm, block_transpose, device_galerkin, device_smooth_prolongator, DeviceBlockCsr,
};

/// A random block CSR matrix with uneven rows: most rows have up to `per_row` blocks, every
/// 53rd row is long (up to 120 blocks, beyond a warp), every 17th row is empty.
fn random_bcsr(g: &mut Lcg, nr: usize, nc: usize, per_row: usize) -> BlockCsr {
    let mut row_ptr = vec![0u32];
    let mut cols = Vec::new();
    let mut vals = Vec::new();
    for i in 0..nr {
        let len = if i % 17 == 5 {
            0
        } else if i % 53 == 0 {
            (g.next() % 120) as usize
        } else {
            (g.next() % per_row as u64) as usize
        };
        let mut c: Vec<u32> = (0..len).map(|_| (g.next() % nc as u64) as u32).collect();
        c.sort_unstable();
        c.dedup();
        for _ in 0..c.len() * 9 {
            vals.push(g.f());
        }
        cols.extend(c);
        row_ptr.push(cols.len() as u32);
    }
    BlockCsr {
        nrows: nr,
        ncols: nc,
        row_ptr,
        cols,
        vals,
    }
}

/// Same pattern exactly, values to `tol` relative to the largest entry.
fn assert_bcsr_eq(what: &str, dev: &BlockCsr, host: &BlockCsr, tol: f64) {
    assert_eq!(
        (dev.nrows, dev.ncols),
        (host.nrows, host.ncols),
        "{what}: shape"
    );
    assert_eq!(dev.row_ptr, host.row_ptr, "{what}: row offsets");
    assert_eq!(dev.cols, host.cols, "{what}: columns");
    let scale = host
        .vals
        .iter()
        .fold(0.0f64, |s, v| s.max(v.abs()))
        .max(1e-300);
    let err = dev
        .vals
        .iter()
        .zip(&host.vals)
        .fold(0.0f64, |s, (a, b)| s.max((a - b).abs()));
    println!(
        "{what}: {} x {} blocks, {} stored, max rel diff {:.3e}",
        host.nrows,
        host.ncols,
        host.nnz(),
        err / scale
    );
    assert!(err <= tol * scale, "{what}: {err:e} > {tol:e} * {scale:e}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn block_spgemm_matches_reference() {
    let Some(gpu) = gpu() else { return };
    let k = SolveKernels::new(&gpu).unwrap();
    let prim = gpu.primitives().unwrap();
    let mut g = Lcg(12);
    for (m, n, q, per_row) in [
        (1usize, 1usize, 1usize, 2usize),
        (37, 23, 41, 5),
        (1000, 700, 900, 12),
        (5003, 4001, 777, 30),
    ] {
        let a = random_bcsr(&mut g, m, n, per_row);
        let b = random_bcsr(&mut g, n, q, per_row);
        let (ad, bd) = (
            DeviceBlockCsr::upload(&gpu, &a).unwrap(),
            DeviceBlockCsr::upload(&gpu, &b).unwrap(),
        );
        let c = block_spgemm(&k, &prim, &ad, &bd)
            .unwrap()
            .download(&gpu)
            .unwrap();
        c.validate().unwrap();
        assert_bcsr_eq(
            &format!("A B ({m} x {n} x {q})"),
            &c,
            &a.matmul(&b).unwrap(),
            1e-14,
        );
        let t = block_transpose(&k, &prim, &ad)
            .unwrap()
            .download(&gpu)
            .unwrap();
        assert_bcsr_eq(&format!("A^T ({m} x {n})"), &t, &a.transpose(), 0.0);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn galerkin_products_match_reference() {
    let Some(gpu) = gpu() else { return };
    let k = SolveKernels::new(&gpu).unwrap();
    let prim = gpu.primitives().unwrap();
    let mut g = Lcg(34);
    for (n, nc) in [(40usize, 7usize), (3001, 400)] {
        // a symmetric positive definite operator M Mᵀ + diagonal, a random tentative
        // prolongator with two blocks per row (some rows empty)
        let mm = random_bcsr(&mut g, n, n, 6);
        let mut a = mm.matmul(&mm.transpose()).unwrap();
        for i in 0..n {
            let kk = a.find(i, i as u32);
            if let Some(kk) = kk {
                for c in 0..3 {
                    a.vals[kk * 9 + c * 4] += 50.0;
                }
            }
        }
        let mut row_ptr = vec![0u32];
        let mut cols = Vec::new();
        let mut vals = Vec::new();
        for i in 0..n {
            if i % 11 != 3 {
                let agg = (g.next() % nc as u64) as u32;
                cols.extend([2 * agg, 2 * agg + 1]);
                vals.extend((0..18).map(|_| g.f()));
            }
            row_ptr.push(cols.len() as u32);
        }
        let pt = BlockCsr {
            nrows: n,
            ncols: 2 * nc,
            row_ptr,
            cols,
            vals,
        };
        // rows without a diagonal block get a unit one through inverse_diagonal
        let dinv = inverse_diagonal(&a).unwrap();
        let omega = 0.37;
        let p = smooth_prolongator(&a, &dinv, &pt, omega).unwrap();
        let (r, ac) = galerkin(&a, &p).unwrap();
        let ad = DeviceBlockCsr::upload(&gpu, &a).unwrap();
        let ptd = DeviceBlockCsr::upload(&gpu, &pt).unwrap();
        let dd = gpu.upload(dinv.inverses()).unwrap();
        let pd = device_smooth_prolongator(&k, &prim, &ad, &dd, &ptd, omega).unwrap();
        assert_bcsr_eq(
            &format!("smoothed P ({n})"),
            &pd.download(&gpu).unwrap(),
            &p,
            1e-14,
        );
        let (rd, acd) = device_galerkin(&k, &prim, &ad, &pd).unwrap();
        assert_bcsr_eq(&format!("R ({n})"), &rd.download(&gpu).unwrap(), &r, 1e-14);
        let acd = acd.download(&gpu).unwrap();
        assert_bcsr_eq(&format!("R A P ({n})"), &acd, &ac, 1e-13);
        assert_eq!(
            acd.asymmetry(),
            0.0,
            "the device Galerkin operator is symmetric"
        );
    }
}

/// Halo index lists of a domain with `owned` owned and `halo` halo nodes: `count` distinct
/// owned nodes in a shuffled order (a send list) and the halo nodes in a shuffled order
/// (a receive list).
fn halo_lists(g: &mut Lcg, owned: usize, halo: usize, count: usize) -> (Vec<u32>, Vec<u32>) {
    let mut send: Vec<u32> = (0..owned as u32).collect();
    for i in (1..send.len()).rev() {
        send.swap(i, (g.next() % (i as u64 + 1)) as usize);
    }
    send.truncate(count);
    let mut recv: Vec<u32> = (owned as u32..(owned + halo) as u32).collect();
    for i in (1..recv.len()).rev() {
        recv.swap(i, (g.next() % (i as u64 + 1)) as usize);
    }
    (send, recv)
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn halo_pack_matches_reference() {
    use tessera_solve::cuda::halo::{halo_pack, halo_pack_reference};
    let Some(gpu) = gpu() else { return };
    let k = SolveKernels::new(&gpu).unwrap();
    let mut g = Lcg(2101);
    for &(e, owned, count) in &[
        (1, 1000, 333),
        (2, 70, 33),
        (3, 5003, 1777),
        (3, 40_000, 39_999),
        (3, 10, 0),
    ] {
        let (send, _) = halo_lists(&mut g, owned, 0, count);
        let x: Vec<f64> = (0..(owned + 17) * e).map(|_| g.f()).collect();
        let xd = gpu.upload(&x).unwrap();
        let idx = gpu.upload(&send).unwrap();
        let mut buf = gpu.zeros::<f64>(count * e + 5).unwrap();
        halo_pack(&k, &gpu, count, e, &idx, &xd, &mut buf).unwrap();
        let got = gpu.download(&buf).unwrap();
        let want = halo_pack_reference(&send, e, &x);
        // a copy: exactly equal; the slack after the packed values is untouched
        assert_eq!(&got[..count * e], &want[..], "e = {e}, count = {count}");
        assert!(got[count * e..].iter().all(|&v| v == 0.0));
    }
    // a list longer than the buffer is an error, not an out-of-bounds write
    let idx = gpu.upload(&[0u32, 1, 2]).unwrap();
    let x = gpu.zeros::<f64>(9).unwrap();
    let mut small = gpu.zeros::<f64>(8).unwrap();
    assert!(halo_pack(&k, &gpu, 3, 3, &idx, &x, &mut small).is_err());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn halo_unpack_matches_reference() {
    use tessera_solve::cuda::halo::{halo_unpack, halo_unpack_reference};
    let Some(gpu) = gpu() else { return };
    let k = SolveKernels::new(&gpu).unwrap();
    let mut g = Lcg(2102);
    for &(e, owned, halo) in &[
        (1, 1000, 333),
        (2, 50, 45),
        (3, 5003, 1777),
        (3, 20_000, 31_111),
        (3, 10, 0),
    ] {
        let (_, recv) = halo_lists(&mut g, owned, halo, 0);
        let mut x: Vec<f64> = (0..(owned + halo) * e).map(|_| g.f()).collect();
        let buf: Vec<f64> = (0..halo * e).map(|_| g.f()).collect();
        let mut xd = gpu.upload(&x).unwrap();
        let bd = gpu.upload(&buf).unwrap();
        let idx = gpu.upload(&recv).unwrap();
        halo_unpack(&k, &gpu, halo, e, &idx, &bd, &mut xd).unwrap();
        let got = gpu.download(&xd).unwrap();
        halo_unpack_reference(&recv, e, &buf, &mut x);
        // owned part untouched, halo part scattered: exactly equal
        assert_eq!(got, x, "e = {e}, halo = {halo}");
    }
}
