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
