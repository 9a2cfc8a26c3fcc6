//! GPU rows of `tessera bench meshmatrix` (seed 004 §9, Tables 2-5): every operation on an
//! uploaded mesh matrix, timed with CUDA events (median of `runs` after 3 warm-ups), with the
//! bytes it must move at least (`f32` values, 32-bit indices). Baselines on the same matrices:
//! cuSPARSE CSR SpMV on the explicit matrix (`Mᵀ` with faces as rows; `M` with vertices as rows;
//! and, as in the seed's Table 2, `M v` as cuSPARSE's transposed SpMV of the stored `Mᵀ`), and
//! the dissertation's TCSR for the same relations (face -> vertices, vertex -> faces, vertex ->
//! vertices). Operations that build derived data (transpose, half-edges) build it in every run
//! unless the row says "cached". The floor of a row is the floor of its operation (the fewest
//! bytes any method must move: structure-free inputs `rowind`, `P`, `x` read once, outputs
//! written once), the same for every variant of a section; `structure bytes` is what each
//! variant keeps in memory for the relation it reads.

use super::mesh_matrix::{upload_points, MeshMatrixKernels};
use crate::mesh_matrix::bench::{bench_plane, seed_for, BenchRow};
use crate::mesh_matrix::edges::half_edges;
use crate::mesh_matrix::normals::NormalWeights;
use crate::mesh_matrix::{ActionMap, MeshMatrix, PolygonMesh};
use crate::simplex::SimplexMesh;
use crate::MeshError;
use tessera_gpu::cusparse::CusparseSpmv;
use tessera_gpu::{DeviceBuffer, Gpu};
use tessera_sparse::Tcsr;

fn row(section: &str, variant: &str, ms: f64, bytes: u64) -> BenchRow {
    BenchRow {
        section: section.into(),
        variant: variant.into(),
        device: "gpu".into(),
        ms,
        bytes,
        structure_bytes: None,
        seed: None,
        note: String::new(),
    }
}

/// Time `f` with CUDA events (3 warm-up runs); a non-GPU error inside is returned as is.
fn time(
    gpu: &Gpu,
    runs: usize,
    f: impl FnMut() -> Result<(), MeshError>,
) -> Result<f64, MeshError> {
    super::bench::median_ms_of(gpu, runs, 3, f)
}

fn max_rel(a: &[f32], b: &[f32]) -> f64 {
    let s = b
        .iter()
        .fold(0.0f64, |m, &x| m.max(x.abs() as f64))
        .max(1e-30);
    a.iter()
        .zip(b)
        .map(|(x, y)| (*x as f64 - *y as f64).abs())
        .fold(0.0, f64::max)
        / s
}

/// The TCSR of face -> vertices (all entries +1) and its transpose vertex -> faces.
fn tcsr_relations(m: &MeshMatrix) -> Result<(Tcsr, Tcsr), MeshError> {
    let cols: Vec<i32> = m.rowind().iter().map(|&v| v as i32).collect();
    let fv = Tcsr::new(m.num_vertices(), m.offsets(), cols)?;
    let vf = fv.transpose(tessera_core::Par::Rayon);
    Ok((fv, vf))
}

/// The TCSR vertex -> vertices adjacency (each edge in both rows, columns sorted).
fn tcsr_adjacency(m: &MeshMatrix) -> Result<Tcsr, MeshError> {
    let he = half_edges(m)?;
    let nv = m.num_vertices();
    let mut counts = vec![0u32; nv + 1];
    for e in 0..he.num_edges() {
        let [a, b] = he.edge_vertices(m, e);
        counts[a as usize + 1] += 1;
        counts[b as usize + 1] += 1;
    }
    for i in 0..nv {
        counts[i + 1] += counts[i];
    }
    let offsets = counts.clone();
    let mut cols = vec![0i32; offsets[nv] as usize];
    for e in 0..he.num_edges() {
        let [a, b] = he.edge_vertices(m, e);
        cols[counts[a as usize] as usize] = b as i32;
        counts[a as usize] += 1;
        cols[counts[b as usize] as usize] = a as i32;
        counts[b as usize] += 1;
    }
    let mut t = Tcsr::new(nv, offsets, cols)?;
    t.sort_rows(tessera_core::Par::Rayon);
    Ok(t)
}

/// The GPU rows of one triangle surface (`spmv_only`: the Mᵀ v and M v sections only).
pub fn run_gpu(
    gpu: &Gpu,
    mesh: &PolygonMesh,
    runs: usize,
    spmv_only: bool,
) -> Result<Vec<BenchRow>, MeshError> {
    let runs = runs.max(5);
    let k = MeshMatrixKernels::new(gpu)?;
    let m = &mesh.matrix;
    if m.uniform_size() != Some(3) {
        return Err(MeshError::Unsupported(
            "the mesh matrix benchmark runs on triangle surfaces".into(),
        ));
    }
    let (nv, nf) = (mesh.num_vertices(), mesh.num_faces());
    let (nv64, nf64) = (nv as u64, nf as u64);
    let seed = seed_for(nf);
    let mut rows = Vec::new();
    let mut dm = k.upload(m)?;
    let dmc = k.upload(&m.with_colptr())?;
    let p32 = upload_points::<f32>(gpu, &mesh.positions)?;
    let xv_h: Vec<f32> = (0..nv).map(|i| 0.5 + (i % 1000) as f32 * 1e-3).collect();
    let xf_h: Vec<f32> = (0..nf).map(|i| 0.5 + (i % 997) as f32 * 1e-3).collect();
    let xv = gpu.upload(&xv_h)?;
    let xf = gpu.upload(&xf_h)?;
    let ones = k.upload_map::<f32>(&dm, &ActionMap::binary())?;
    let ones_c = k.upload_map::<f32>(&dmc, &ActionMap::binary())?;
    let mut yf = gpu.alloc::<f32>(nf)?;
    let mut yv = gpu.alloc::<f32>(nv)?;
    let t2 = seed.table2;

    // ---- Mᵀ v (Table 2, left)
    let mtv_bytes = 12 * nf64 + 4 * nv64 + 4 * nf64;
    let ms = time(gpu, runs, || k.mtv_into(&dm, &ones, &xv, 1, &mut yf))?;
    let mut r = row("Mᵀ v", "mesh matrix, rowind only, M̄ map", ms, mtv_bytes);
    r.structure_bytes = Some(m.bytes() as u64);
    r.seed = t2.map(|t| format!("{} ms (ours), {} ms (cuSPARSE), {}", t[1], t[0], seed.model));
    rows.push(r);
    let ours_t = gpu.download(&yf)?;
    let ms = time(gpu, runs, || k.mtv_into(&dmc, &ones_c, &xv, 1, &mut yf))?;
    let mut r = row("Mᵀ v", "mesh matrix, rowind + colptr", ms, mtv_bytes);
    r.structure_bytes = Some(dmc.bytes() as u64);
    rows.push(r);
    let (colptr, rowind_sorted, _) = m.to_csc();
    let vals1 = vec![1.0f32; m.nnz()];
    {
        let mut cs = CusparseSpmv::<f32>::csr(
            gpu.ordinal(),
            nf,
            nv,
            &colptr,
            &rowind_sorted,
            &vals1,
            &xv_h,
            false,
        )?;
        let ms = cs.median_ms(runs, 3)?;
        let d = max_rel(&cs.result()?, &ours_t);
        let mut r = row(
            "Mᵀ v",
            "cuSPARSE CSR of the explicit Mᵀ (faces as rows, f32 values)",
            ms,
            mtv_bytes,
        );
        r.structure_bytes = Some(4 * (nf64 + 1) + 24 * nf64);
        r.note = format!("max rel. diff to ours {d:.1e}");
        rows.push(r);
    }
    let (tfv, tvf) = tcsr_relations(m)?;
    let (fv_off, fv_col) = (gpu.upload(tfv.offsets())?, gpu.upload(tfv.columns())?);
    let ms = time(gpu, runs, || {
        k.tcsr_spmv_f32(&fv_off, &fv_col, &xv, &mut yf)
    })?;
    let mut r = row("Mᵀ v", "TCSR face -> vertices", ms, mtv_bytes);
    r.structure_bytes = Some(tfv.bytes() as u64);
    r.note = format!(
        "max rel. diff to ours {:.1e}",
        max_rel(&gpu.download(&yf)?, &ours_t)
    );
    rows.push(r);

    // ---- M v (Table 2, right)
    let mv_bytes = 12 * nf64 + 4 * nf64 + 4 * nv64;
    let ms = time(gpu, runs, || k.mv_atomic_into(&dm, &ones, &xf, 1, &mut yv))?;
    let ours = gpu.download(&yv)?;
    let mut r = row("M v", "mesh matrix, atomics (no transpose)", ms, mv_bytes);
    r.structure_bytes = Some(m.bytes() as u64);
    r.seed = t2.map(|t| format!("{} ms (ours), {} ms (cuSPARSE), {}", t[3], t[2], seed.model));
    rows.push(r);
    let ms_t = time(gpu, runs, || k.transpose(&dm).map(drop))?;
    k.require_transpose(&mut dm)?;
    let tb = dm.cached_transpose().expect("required").bytes() as u64;
    let mut r = row(
        "transpose",
        "vertex -> corners (histogram, scan, fill, segmented sort)",
        ms_t,
        12 * nf64 + tb,
    );
    r.structure_bytes = Some(tb);
    rows.push(r);
    {
        let t = dm.cached_transpose().expect("required");
        let ms = time(gpu, runs, || {
            k.mv_gather_into(&dm, t, &ones, &xf, 1, &mut yv)
        })?;
        let mut r = row(
            "M v",
            "mesh matrix, gather over the cached transpose",
            ms,
            mv_bytes,
        );
        r.structure_bytes = Some(m.bytes() as u64 + tb);
        r.note = format!(
            "max rel. diff to atomics {:.1e}",
            max_rel(&gpu.download(&yv)?, &ours)
        );
        rows.push(r);
    }
    {
        let mb = m.binary();
        let v32: Vec<f32> = mb.values.iter().map(|&x| x as f32).collect();
        let mut cs = CusparseSpmv::<f32>::csr(
            gpu.ordinal(),
            nv,
            nf,
            &mb.rowptr,
            &mb.colind,
            &v32,
            &xf_h,
            false,
        )?;
        let ms = cs.median_ms(runs, 3)?;
        let d = max_rel(&cs.result()?, &ours);
        let mut r = row(
            "M v",
            "cuSPARSE CSR of the explicit M (vertices as rows, f32 values)",
            ms,
            mv_bytes,
        );
        r.structure_bytes = Some(4 * (nv64 + 1) + 24 * nf64);
        r.note = format!("max rel. diff to ours {d:.1e}");
        rows.push(r);
        drop(cs);
        let mut cs = CusparseSpmv::<f32>::csr_op(
            gpu.ordinal(),
            nf,
            nv,
            &colptr,
            &rowind_sorted,
            &vals1,
            &xf_h,
            false,
            true,
        )?;
        let ms = cs.median_ms(runs, 3)?;
        let d = max_rel(&cs.result()?, &ours);
        let mut r = row(
            "M v",
            "cuSPARSE transposed SpMV of the stored Mᵀ CSR (the seed's Table 2 setting)",
            ms,
            mv_bytes,
        );
        r.structure_bytes = Some(4 * (nf64 + 1) + 24 * nf64);
        r.note = format!("max rel. diff to ours {d:.1e}");
        rows.push(r);
    }
    let (vf_off, vf_col) = (gpu.upload(tvf.offsets())?, gpu.upload(tvf.columns())?);
    let ms = time(gpu, runs, || {
        k.tcsr_spmv_f32(&vf_off, &vf_col, &xf, &mut yv)
    })?;
    let mut r = row("M v", "TCSR vertex -> faces", ms, mv_bytes);
    r.structure_bytes = Some(tvf.bytes() as u64);
    r.note = format!(
        "max rel. diff to ours {:.1e}",
        max_rel(&gpu.download(&yv)?, &ours)
    );
    rows.push(r);
    if spmv_only {
        return Ok(rows);
    }

    // ---- adjacency (vertex -> vertices) applied to a vector
    let tadj = tcsr_adjacency(m)?;
    let (ad_off, ad_col) = (gpu.upload(tadj.offsets())?, gpu.upload(tadj.columns())?);
    let ms = time(gpu, runs, || k.adjacency_scatter_f32(&dm, &xv, &mut yv))?;
    let ours_a = gpu.download(&yv)?;
    let mut r = row(
        "A v (adjacency)",
        "mesh matrix, M̄ Q_3 M̄ᵀ v without forming it (atomics)",
        ms,
        12 * nf64 + 8 * nv64,
    );
    r.structure_bytes = Some(m.bytes() as u64);
    rows.push(r);
    let ms = time(gpu, runs, || {
        k.tcsr_spmv_f32(&ad_off, &ad_col, &xv, &mut yv)
    })?;
    let mut r = row(
        "A v (adjacency)",
        "TCSR vertex -> vertices",
        ms,
        12 * nf64 + 8 * nv64,
    );
    r.structure_bytes = Some(tadj.bytes() as u64);
    r.note = format!(
        "max rel. diff to the mesh matrix {:.1e} (equal on closed surfaces)",
        max_rel(&gpu.download(&yv)?, &ours_a)
    );
    rows.push(r);

    // ---- 3-vector products: edge vectors Mᵀ_(-1,1,0) P and M N
    let edge_map = k.upload_map::<f32>(&dm, &ActionMap::stencil(&[-1.0, 1.0, 0.0]))?;
    let mut y3f = gpu.alloc::<f32>(3 * nf)?;
    let ms = time(gpu, runs, || k.mtv_into(&dm, &edge_map, &p32, 3, &mut y3f))?;
    rows.push(row(
        "Mᵀ P (3 columns)",
        "edge vectors P1P2 = Mᵀ_(-1,1,0) P",
        ms,
        12 * nf64 + 12 * nv64 + 12 * nf64,
    ));
    let mut y3v = gpu.alloc::<f32>(3 * nv)?;
    let ms = time(gpu, runs, || {
        k.mv_atomic_into(&dm, &ones, &y3f, 3, &mut y3v)
    })?;
    rows.push(row(
        "M N (3 columns)",
        "M̄ N_f, atomics",
        ms,
        12 * nf64 + 12 * nf64 + 12 * nv64,
    ));

    // ---- vertex normals (Table 3)
    let nbytes = 12 * nf64 + 24 * nv64;
    let mut nout = gpu.alloc::<f32>(3 * nv)?;
    for w in [
        NormalWeights::Area,
        NormalWeights::Angle,
        NormalWeights::Max,
    ] {
        for gather in [false, true] {
            let ms = time(gpu, runs, || {
                k.normals_into(&dm, &p32, w, gather, &mut nout)
            })?;
            let mut r = row(
                "vertex normals",
                &format!(
                    "{} weights, {}",
                    w.name(),
                    if gather {
                        "gather over the cached transpose"
                    } else {
                        "scatter (atomics, M only)"
                    }
                ),
                ms,
                nbytes,
            );
            if w == NormalWeights::Max && !gather {
                r.seed = Some(format!(
                    "{} ms (980 Ti), {}",
                    seed.normals[2] * 1e3,
                    seed.model
                ));
            }
            rows.push(r);
        }
    }

    // ---- plane slicing (Table 4): from the uploaded matrix, relations built in the run
    let mut d2 = k.upload(m)?;
    let plane = bench_plane(mesh);
    let mut cut_faces = 0usize;
    let mut cut_edges = 0usize;
    let ms = time(gpu, runs, || {
        d2.purge_caches();
        let s = k.slice(&mut d2, &p32, &plane)?;
        cut_edges = s.cut_edges;
        cut_faces = s.mesh.num_faces() - nf;
        Ok(())
    })?;
    let (cf, ce) = (cut_faces as u64, cut_edges as u64);
    let sbytes = 12 * nf64
        + 12 * nv64
        + 4 * (3 * nf64 + 4 * cf)
        + 4 * (nf64 + cf + 1)
        + 12 * (nv64 + ce)
        + 4 * (nf64 + cf)
        + 8 * cf;
    let mut r = row(
        "slicing",
        "plane through the centre (transpose and half-edges built in the run)",
        ms,
        sbytes,
    );
    r.seed = Some(format!(
        "{} ms (980 Ti), {}",
        seed.slicing[1] * 1e3,
        seed.model
    ));
    r.note = format!("{cut_edges} cut edges");
    rows.push(r);

    // ---- surface Catmull-Clark (Table 5): one step from the uploaded matrix
    let mut ne = 0usize;
    let ms = time(gpu, runs, || {
        d2.purge_caches();
        let (out, _p) = k.catmull_clark(&mut d2, &p32)?;
        ne = out.num_vertices() - nv - nf;
        Ok(())
    })?;
    let cbytes = 12 * nf64 + 12 * nv64 + 16 * 3 * nf64 + 12 * (nv64 + ne as u64 + nf64);
    let mut r = row(
        "Catmull-Clark, 1 step",
        "from the face table (transpose, half-edges and fans built in the run)",
        ms,
        cbytes,
    );
    r.seed = Some(format!(
        "{} ms (980 Ti), {} ms (OpenSubdiv), {}",
        seed.catmull_clark[3] * 1e3,
        seed.catmull_clark[1] * 1e3,
        seed.model
    ));
    r.note = format!("-> {} vertices, {} quads", nv + ne + nf, 3 * nf);
    rows.push(r);

    // ---- Laplacian assembly (seed §6, Fig. 4): from the uploaded matrix (transpose built in the run)
    let mut lnnz = 0usize;
    let ms = time(gpu, runs, || {
        d2.purge_caches();
        lnnz = k
            .spgemm::<f32>(&mut d2, &crate::mesh_matrix::PairMap::graph_laplacian())?
            .nnz();
        Ok(())
    })?;
    rows.push(row(
        "Laplacian assembly",
        "uniform (graph), CSR f32",
        ms,
        12 * nf64 + 4 * (nv64 + 1) + 8 * lnnz as u64,
    ));
    let ms = time(gpu, runs, || {
        d2.purge_caches();
        lnnz = k.cotan_laplacian::<f32>(&mut d2, &p32)?.nnz();
        Ok(())
    })?;
    let mut r = row(
        "Laplacian assembly",
        "cotangent (P1 triangles), CSR f32",
        ms,
        12 * nf64 + 12 * nv64 + 4 * (nv64 + 1) + 8 * lnnz as u64,
    );
    r.seed = Some("Fig. 4: speed-ups over Matlab `sparse` (not tabulated)".into());
    rows.push(r);
    Ok(rows)
}

/// GPU rows of the P1 tetrahedral Laplacian assembly (Q_tet; seed §6, Fig. 5).
pub fn run_gpu_tets(
    gpu: &Gpu,
    mesh: &SimplexMesh,
    runs: usize,
) -> Result<Vec<BenchRow>, MeshError> {
    let k = MeshMatrixKernels::new(gpu)?;
    let cells = MeshMatrix::from_simplex_cells(mesh)?;
    let p: DeviceBuffer<f32> = upload_points(gpu, mesh.positions())?;
    let mut lnnz = 0usize;
    let mut d = k.upload(&cells)?;
    let ms = time(gpu, runs.max(5), || {
        d.purge_caches();
        lnnz = k.tet_laplacian::<f32>(&mut d, &p)?.nnz();
        Ok(())
    })?;
    let (nc, nv) = (mesh.num_cells() as u64, mesh.num_vertices() as u64);
    let mut r = row(
        "Laplacian assembly",
        "P1 tetrahedra (Q_tet, edge values on the device), CSR f32",
        ms,
        16 * nc + 12 * nv + 4 * (nv + 1) + 8 * lnnz as u64,
    );
    r.seed = Some("Fig. 5: up to 150x Matlab `sparse` (not tabulated)".into());
    r.note = format!("{lnnz} entries");
    Ok(vec![r])
}
