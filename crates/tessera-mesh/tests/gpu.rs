//! GPU mesh operations against the CPU reference (dissertation §3.4.1-§3.4.2). Each test
//! needs a CUDA GPU (`#[ignore]`d; run on the device machine through
//! `../shared/tools/device-pack -p tessera-mesh`) and skips with a message when none is
//! found; set `TESSERA_REQUIRE_GPU=1` to make a missing GPU a failure instead.
//!
//! Meshes (fixed seeds, well above warp size, ragged rows): a mixed box (hexahedra, prisms,
//! pyramids, tetrahedra), the tetrahedral bracket, a builder mesh of hexahedra with free
//! faces and a duplicated cell (non-manifold), a fan of tetrahedra around one axis (rows of
//! more than 64 entries: the long-row path of the segmented sort), a box whose ∂2 rows are
//! permuted out of loop order (the chained face-loop path), and the small non-manifold
//! example. Topology must match exactly; positions within 1e-12 of the mesh extent.

use tessera_core::Par;
use tessera_gpu::Gpu;
use tessera_mesh::boundary::{extract_boundary, Boundary};
use tessera_mesh::cuda::DeviceMesh;
use tessera_mesh::generate::{box_mesh, bracket, non_manifold_example, BoxKind};
use tessera_mesh::simplex::SimplexMesh;
use tessera_mesh::smooth::{safe_smoothed_positions, smoothed_positions, SafeSetup};
use tessera_mesh::{CellType, PolyMesh, PolyMeshBuilder};
use tessera_sparse::{tcsr, Tcsr};

#[path = "common/open_cells.rs"]
mod open_cells;
use open_cells::open_cells;

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

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Fisher-Yates: `s` in a random order.
    fn shuffle<T>(&mut self, s: &mut [T]) {
        for i in (1..s.len()).rev() {
            s.swap(i, (self.next() % (i as u64 + 1)) as usize);
        }
    }
}

/// Hexahedra on an n^3 grid with jittered positions, plus free faces on top (each used by no
/// cell) and one cell added twice: non-manifold, ragged vertex valences.
fn builder_mesh(n: usize, seed: u64) -> PolyMesh {
    let mut r = Rng(seed);
    let id = |i: usize, j: usize, k: usize| (i + (n + 1) * (j + (n + 1) * k)) as u32;
    let mut pos = Vec::new();
    for k in 0..=n {
        for j in 0..=n {
            for i in 0..=n {
                let jit = |r: &mut Rng| ((r.next() >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 0.2;
                pos.push([
                    i as f64 + jit(&mut r),
                    j as f64 + jit(&mut r),
                    k as f64 + jit(&mut r),
                ]);
            }
        }
    }
    let top = pos.len() as u32;
    // a row of extra vertices above the top layer for the free faces
    for i in 0..=n {
        pos.push([i as f64, 0.0, n as f64 + 1.0]);
    }
    let mut b = PolyMeshBuilder::new(pos);
    let hex = |b: &mut PolyMeshBuilder, i, j, k| {
        let v = [
            id(i, j, k),
            id(i + 1, j, k),
            id(i + 1, j + 1, k),
            id(i, j + 1, k),
            id(i, j, k + 1),
            id(i + 1, j, k + 1),
            id(i + 1, j + 1, k + 1),
            id(i, j + 1, k + 1),
        ];
        b.add_typed_cell(CellType::Hexahedron, &v).unwrap();
    };
    for k in 0..n {
        for j in 0..n {
            for i in 0..n {
                hex(&mut b, i, j, k);
            }
        }
    }
    hex(&mut b, n / 2, n / 2, n / 2); // the same cell again: its faces get 2 cells on one side
    for i in 0..n {
        // free quad standing on the top edge (i, 0, n) - (i+1, 0, n)
        b.add_free_face(&[
            id(i, 0, n),
            id(i + 1, 0, n),
            top + i as u32 + 1,
            top + i as u32,
        ])
        .unwrap();
    }
    b.build(Par::Seq).unwrap()
}

/// Tetrahedra fanned around the z axis: the apex and the centre have one edge to every ring
/// vertex (rows of ~100 entries in δ1; the axis edge has 100 faces in δ2).
fn fan_mesh(m: usize) -> PolyMesh {
    let mut pos = vec![[0.0, 0.0, 0.0], [0.0, 0.0, 1.0]];
    for i in 0..m {
        let t = i as f64 / m as f64 * std::f64::consts::TAU;
        pos.push([t.cos(), t.sin(), 0.0]);
    }
    let mut b = PolyMeshBuilder::new(pos);
    for i in 0..m {
        let (a, c) = (2 + i as u32, 2 + ((i + 1) % m) as u32);
        b.add_typed_cell(CellType::Tetrahedron, &[0, a, c, 1])
            .unwrap();
    }
    b.build(Par::Seq).unwrap()
}

/// A mixed box whose ∂2 rows are rotated / reversed for every third face, so the face
/// loops must be chained (the rows stay valid: same signed edges, another order).
fn permuted_box() -> PolyMesh {
    let m = box_mesh(BoxKind::Mixed, [6, 5, 4], [1.0, 1.0, 1.0]);
    let (pos, ev, fe, cf) = m.into_parts();
    let (ncols, offs, mut cols) = fe.into_raw();
    for f in 0..offs.len() - 1 {
        let row = &mut cols[offs[f] as usize..offs[f + 1] as usize];
        match f % 3 {
            0 => row.reverse(),
            1 => row.swap(0, 1),
            _ => {}
        }
    }
    PolyMesh::from_operators(pos, ev, Tcsr::new(ncols, offs, cols).unwrap(), cf).unwrap()
}

fn meshes() -> Vec<(&'static str, PolyMesh)> {
    vec![
        (
            "mixed box 9x8x7",
            box_mesh(BoxKind::Mixed, [9, 8, 7], [1.8, 1.6, 1.4]),
        ),
        ("bracket(24)", bracket(24).unwrap()),
        (
            "builder hexes + free faces + duplicate cell",
            builder_mesh(7, 42),
        ),
        ("fan of 100 tets", fan_mesh(100)),
        ("mixed box with permuted face rows", permuted_box()),
        ("non-manifold example", non_manifold_example()),
        (
            "tet box 30x30x30",
            box_mesh(BoxKind::Tet, [30, 30, 30], [1.0, 1.0, 1.0]),
        ),
    ]
}

/// The register kernels for cells of one shape against the reference, on closed cells and
/// on meshes where some cells are open (the general path must take over).
#[test]
#[ignore = "needs a CUDA GPU"]
fn uniform_cell_rows_matches_reference() {
    let Some(g) = gpu() else { return };
    for (name, m) in [
        (
            "tet box 17x9x5",
            box_mesh(BoxKind::Tet, [17, 9, 5], [1.0, 1.0, 1.0]),
        ),
        (
            "hex box 17x9x5",
            box_mesh(BoxKind::Hex, [17, 9, 5], [1.0, 1.0, 1.0]),
        ),
        ("tet box with two open cells", open_cells(BoxKind::Tet)),
        ("hex box with two open cells", open_cells(BoxKind::Hex)),
    ] {
        let mut dm = DeviceMesh::upload(&g, &m).unwrap();
        assert!(dm.cell_faces().uniform.is_some(), "{name}: uniform ∂3 rows");
        assert!(dm.face_edges().uniform.is_some(), "{name}: uniform ∂2 rows");
        same_tcsr(
            "cell vertices",
            name,
            &dm.cell_vertices().unwrap().download(&g).unwrap(),
            m.cell_vertices(),
        );
        same_tcsr(
            "cell edges",
            name,
            &dm.cell_edges().unwrap().download(&g).unwrap(),
            m.cell_edges(),
        );
        same_tcsr(
            "δ3 (uniform fill)",
            name,
            &dm.face_cells().unwrap().download(&g).unwrap(),
            m.face_cells(),
        );
        same_tcsr(
            "δ2 (uniform fill)",
            name,
            &dm.edge_faces().unwrap().download(&g).unwrap(),
            m.edge_faces(),
        );
    }
}

fn same_tcsr(what: &str, mesh: &str, got: &Tcsr, want: &Tcsr) {
    assert_eq!(got.ncols(), want.ncols(), "{what} on {mesh}: ncols");
    assert_eq!(got.nrows(), want.nrows(), "{what} on {mesh}: nrows");
    if let Some(r) = (0..want.nrows()).find(|&r| got.row(r) != want.row(r)) {
        panic!(
            "{what} on {mesh}: first differing row {r}: gpu {:?} != reference {:?}",
            got.row(r),
            want.row(r)
        );
    }
    assert_eq!(got, want, "{what} on {mesh}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn device_mesh_matches_reference() {
    let Some(g) = gpu() else { return };
    for (name, m) in meshes() {
        let mut dm = DeviceMesh::upload(&g, &m).unwrap();
        assert_eq!(
            (
                dm.num_vertices(),
                dm.num_edges(),
                dm.num_faces(),
                dm.num_cells()
            ),
            (
                m.num_vertices(),
                m.num_edges(),
                m.num_faces(),
                m.num_cells()
            ),
            "{name}"
        );
        let back = dm.download().unwrap();
        assert_eq!(
            back.edge_vertices(),
            m.edge_vertices(),
            "{name}: ∂1 round trip"
        );
        same_tcsr("∂2 round trip", name, back.face_edges(), m.face_edges());
        same_tcsr("∂3 round trip", name, back.cell_faces(), m.cell_faces());
        assert_eq!(
            back.cells_known_closed(),
            m.cells_known_closed(),
            "{name}: known closed round trip"
        );
        assert_eq!(
            back.positions(),
            m.positions(),
            "{name}: positions round trip"
        );
        // derived relations are cached on the device
        assert!(dm.cached().is_empty());
        dm.require_face_cells().unwrap();
        dm.require_cell_vertices().unwrap();
        assert_eq!(dm.cached(), vec!["face_cells", "cell_vertices"], "{name}");
        dm.purge_caches();
        assert!(dm.cached().is_empty());
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn transpose_matches_reference() {
    let Some(g) = gpu() else { return };
    for (name, m) in meshes() {
        let mut dm = DeviceMesh::upload(&g, &m).unwrap();
        same_tcsr(
            "δ3 (face_cells)",
            name,
            &dm.face_cells().unwrap().download(&g).unwrap(),
            m.face_cells(),
        );
        same_tcsr(
            "δ2 (edge_faces)",
            name,
            &dm.edge_faces().unwrap().download(&g).unwrap(),
            m.edge_faces(),
        );
        same_tcsr(
            "δ1 (vertex_edges, edge-pair variant)",
            name,
            &dm.vertex_edges().unwrap().download(&g).unwrap(),
            m.vertex_edges(),
        );
        // the transpose of the transpose is the (column-sorted) original
        let t = dm.kernels().transpose(dm.face_edges()).unwrap();
        let tt = dm.kernels().transpose(&t).unwrap().download(&g).unwrap();
        let mut want = m.face_edges().clone();
        want.sort_rows(Par::Seq);
        same_tcsr("(∂2ᵀ)ᵀ", name, &tt, &want);
    }
}

/// The transpose without the longest-row read (δ3 of a 3-manifold: rows of at most two
/// cells) equals the general transpose and the CPU reference on every test mesh, on the
/// duplicated cell's faces (three cells), and on random matrices of uniform rows whose
/// transposes have rows of 40 entries and more (long rows are sorted by their one thread).
#[test]
#[ignore = "needs a CUDA GPU"]
fn transpose_short_rows_matches_reference() {
    let Some(g) = gpu() else { return };
    let mut long_face = false;
    let launches = tessera_mesh::cuda::MeshKernels::with_chains(&g, false).unwrap();
    for (name, m) in meshes() {
        let dm = DeviceMesh::upload(&g, &m).unwrap();
        assert!(
            dm.kernels().one_launch_chains(),
            "cooperative launch on this device"
        );
        for (kern, how) in [(dm.kernels(), "one launch"), (&launches, "launches")] {
            let got = kern
                .transpose_short_rows(dm.cell_faces())
                .unwrap()
                .download(&g)
                .unwrap();
            same_tcsr(
                &format!("δ3 without the longest-row read ({how})"),
                name,
                &got,
                m.face_cells(),
            );
            long_face |= (0..got.nrows()).any(|f| got.row_len(f) > 2);
        }
    }
    assert!(
        long_face,
        "some test mesh must have a face of more than two cells"
    );
    let mut r = Rng(2025);
    for ((nrows, k, ncols), (one_launch, bucketed)) in
        [(500usize, 4u32, 50usize), (3000, 6, 997), (257, 3, 5)]
            .into_iter()
            .flat_map(|c| [(c, (true, true)), (c, (true, false)), (c, (false, false))])
    {
        // distinct columns within a row (as the faces of a cell): no ties in a row of the
        // transpose
        let m = random_uniform_tcsr(&mut r, nrows, k, ncols);
        let dm = tessera_mesh::cuda::DeviceTcsr::upload(&g, &m).unwrap();
        assert_eq!(dm.uniform, Some(k));
        let kern = tessera_mesh::cuda::MeshKernels::with_options(&g, one_launch, bucketed).unwrap();
        assert_eq!(kern.one_launch_chains(), one_launch);
        assert_eq!(kern.bucketed_transpose_grid().is_some(), bucketed);
        let name = format!(
            "random {nrows} x {k} over {ncols} columns (one launch: {one_launch}, bucketed: {bucketed})"
        );
        let want = m.transpose(Par::Seq);
        same_tcsr(
            "short-row transpose",
            &name,
            &kern
                .transpose_short_rows(&dm)
                .unwrap()
                .download(&g)
                .unwrap(),
            &want,
        );
        same_tcsr(
            "transpose",
            &name,
            &kern.transpose(&dm).unwrap().download(&g).unwrap(),
            &want,
        );
    }
}

/// The transpose without its host synchronisation sets its flag exactly when some row is
/// longer than 2048 entries (`longest`), and is the CPU transpose `want` when it does not.
fn deferred_transpose_matches(
    g: &Gpu,
    kern: &tessera_mesh::cuda::MeshKernels,
    dm: &tessera_mesh::cuda::DeviceTcsr,
    want: &Tcsr,
    longest: usize,
    label: &str,
    name: &str,
) {
    let flag = g.zeros::<u32>(1).unwrap();
    let t = kern.transpose_deferred(dm, &flag).unwrap();
    let f = g.download_at(&flag, 0).unwrap();
    assert_eq!(f != 0, longest > 2048, "{name}: deferred flag {f}");
    if f == 0 {
        same_tcsr(label, name, &t.download(g).unwrap(), want);
    }
}

/// The transpose of `dm` by `kern` (`how`: its name), eager and deferred, is the CPU
/// transpose `want` (whose longest row is `longest`).
fn transposes_match(
    g: &Gpu,
    kern: &tessera_mesh::cuda::MeshKernels,
    how: &str,
    dm: &tessera_mesh::cuda::DeviceTcsr,
    want: &Tcsr,
    longest: usize,
    name: &str,
) {
    same_tcsr(
        &format!("transpose ({how})"),
        name,
        &kern.transpose(dm).unwrap().download(g).unwrap(),
        want,
    );
    deferred_transpose_matches(
        g,
        kern,
        dm,
        want,
        longest,
        &format!("deferred transpose ({how})"),
        &format!("{name} ({how})"),
    );
}

/// Random rows of `k` distinct signed columns over `ncols` (as the faces of cells).
fn random_uniform_tcsr(r: &mut Rng, nrows: usize, k: u32, ncols: usize) -> Tcsr {
    random_skewed_tcsr(r, nrows, k, ncols, None)
}

/// [`random_uniform_tcsr`] with `skew` % of the columns drawn from the first 8 (`None`: no
/// such draw at all, the draws of [`random_uniform_tcsr`]).
fn random_skewed_tcsr(r: &mut Rng, nrows: usize, k: u32, ncols: usize, skew: Option<u64>) -> Tcsr {
    let mut cols = Vec::with_capacity(nrows * k as usize);
    for _ in 0..nrows {
        let mut row: Vec<i32> = Vec::new();
        while row.len() < k as usize {
            let c = if skew.is_some_and(|skew| ncols > 8 && r.next() % 100 < skew) {
                (r.next() % 8) as i32
            } else {
                (r.next() % ncols as u64) as i32
            };
            if !row.contains(&c) {
                row.push(c);
            }
        }
        cols.extend(
            row.into_iter()
                .map(|c| if r.next() & 1 == 0 { c } else { !c }),
        );
    }
    let offs: Vec<u32> = (0..=nrows as u32).map(|i| i * k).collect();
    Tcsr::new(ncols, offs, cols).unwrap()
}

/// The transposes whose rows are sorted without reading the longest row first: rows of at
/// most 32 entries (one thread per row), 33..=64 (one warp per row; the third case has rows
/// of about 48), 65..=2048 (one block per row) and longer (left to
/// the general sort: the deferred variants set their flag exactly then), for the TCSR
/// transpose and the edge-pair variant (a star vertex of 300 or 3000 edges).
#[test]
#[ignore = "needs a CUDA GPU"]
fn transpose_long_rows_matches_reference() {
    let Some(g) = gpu() else { return };
    for (one_launch, bucketed) in [(true, true), (true, false), (false, false)] {
        transpose_long_rows_with(&g, one_launch, bucketed);
    }
}

fn transpose_long_rows_with(g: &Gpu, one_launch: bool, bucketed: bool) {
    let kern = tessera_mesh::cuda::MeshKernels::with_options(g, one_launch, bucketed).unwrap();
    assert_eq!(kern.bucketed_transpose_grid().is_some(), bucketed);
    let mut r = Rng(77);
    for (nrows, k, ncols) in [
        (40_000usize, 3u32, 30_000usize),
        (3000, 4, 40),
        (12_000, 4, 1_000),
        (20_000, 4, 25),
        (5000, 2, 3),
    ] {
        let m = random_uniform_tcsr(&mut r, nrows, k, ncols);
        let want = m.transpose(Par::Seq);
        let longest = (0..want.nrows()).map(|c| want.row_len(c)).max().unwrap();
        let dm = tessera_mesh::cuda::DeviceTcsr::upload(g, &m).unwrap();
        let name = format!(
            "random {nrows} x {k} over {ncols} columns (longest row {longest}, one launch: {one_launch}, bucketed: {bucketed})"
        );
        same_tcsr(
            "transpose",
            &name,
            &kern.transpose(&dm).unwrap().download(g).unwrap(),
            &want,
        );
        same_tcsr(
            "short-row transpose",
            &name,
            &kern.transpose_short_rows(&dm).unwrap().download(g).unwrap(),
            &want,
        );
        deferred_transpose_matches(g, &kern, &dm, &want, longest, "deferred transpose", &name);
    }
    for (hub, ring) in [(300u32, 50u32), (3000, 100)] {
        // vertex 0 joined to every other vertex (random direction), plus a path
        let nv = (hub + 1) as usize;
        let mut ev: Vec<[u32; 2]> = Vec::new();
        for v in 1..=hub {
            ev.push(if r.next() & 1 == 0 { [0, v] } else { [v, 0] });
            if v < ring {
                ev.push([v, v + 1]);
            }
        }
        let want = tessera_mesh::relations::transpose_edge_vertices(&ev, nv, Par::Seq);
        let flat: Vec<u32> = ev.iter().flatten().copied().collect();
        let d_ev = g.upload(&flat).unwrap();
        let name = format!("star of {hub} edges (one launch: {one_launch}, bucketed: {bucketed})");
        same_tcsr(
            "edge-pair transpose",
            &name,
            &kern
                .transpose_edge_pairs(&d_ev, nv)
                .unwrap()
                .download(g)
                .unwrap(),
            &want,
        );
        let flag = g.zeros::<u32>(1).unwrap();
        let t = kern
            .transpose_edge_pairs_deferred(&d_ev, nv, &flag)
            .unwrap();
        let f = g.download_at(&flag, 0).unwrap();
        assert_eq!(f != 0, hub > 2048, "{name}: deferred flag {f}");
        if f == 0 {
            same_tcsr(
                "deferred edge-pair transpose",
                &name,
                &t.download(g).unwrap(),
                &want,
            );
        }
    }
}

/// The bucketed transpose (`transpose_bucketed`) on the inputs that take its other paths,
/// against the CPU transpose and the general one-launch kernel: a bucket of more entries
/// than its shared memory holds (half of all entries in 8 columns: done in column ranges),
/// columns longer than that (two columns of 40,000 entries: written from global memory,
/// then the deferred flag or the general sort), empty columns, fewer entries than blocks,
/// one column, and random edge pairs with a hub vertex (mode 2).
#[test]
#[ignore = "needs a CUDA GPU"]
fn transpose_bucketed_matches_reference() {
    let Some(g) = gpu() else { return };
    let bucketed = tessera_mesh::cuda::MeshKernels::with_options(&g, true, true).unwrap();
    let general = tessera_mesh::cuda::MeshKernels::with_options(&g, true, false).unwrap();
    assert!(
        bucketed.bucketed_transpose_grid().is_some(),
        "this device runs the bucketed transpose"
    );
    let mut r = Rng(4242);
    // (rows, k, columns, share of entries drawn from the first 8 columns in %)
    for (nrows, k, ncols, skew) in [
        (60_000usize, 4u32, 20_000usize, 50u64),
        (200_000, 3, 150_000, 0),
        (40_000, 2, 2, 0),
        (10, 3, 100_000, 0),
        (7, 1, 1, 0),
        (5_000, 4, 7_000_000, 0),
        // short-row (two-slot) buckets wider than one window of the general way, whose
        // slots collide: the general way in two windows
        (300_000, 4, 3_000_000, 0),
        // two-slot buckets taken by half blocks, five rounds of them, nearly all colliding:
        // a block lists what its halves could not do until its list is full, then the whole
        // block takes the rest
        (2_500_000, 4, 1_500_000, 0),
    ] {
        let m = random_skewed_tcsr(&mut r, nrows, k, ncols, Some(skew));
        let want = m.transpose(Par::Seq);
        let longest = (0..want.nrows()).map(|c| want.row_len(c)).max().unwrap();
        let dm = tessera_mesh::cuda::DeviceTcsr::upload(&g, &m).unwrap();
        let name = format!(
            "random {nrows} x {k} over {ncols} columns, {skew} % in 8 (longest row {longest})"
        );
        for (kern, how) in [(&bucketed, "bucketed"), (&general, "general")] {
            transposes_match(&g, kern, how, &dm, &want, longest, &name);
            // one thread sorts a row longer than 2048 entries here: not the 40,000-entry rows
            if longest <= 20_000 {
                same_tcsr(
                    &format!("short-row transpose ({how})"),
                    &name,
                    &kern
                        .transpose_short_rows(&dm)
                        .unwrap()
                        .download(&g)
                        .unwrap(),
                    &want,
                );
            }
        }
    }
    // transposed rows of every length from 1 to 20 (column c in c % 20 + 1 input rows of one
    // entry, the rows shuffled) in every bucket: the general way sorts rows of 1-4 and 5-16
    // entries in place by sorting networks and ranks the longer ones
    {
        let ncols = 3_000usize;
        let mut cols: Vec<i32> = (0..ncols)
            .flat_map(|c| std::iter::repeat_n(c as i32, c % 20 + 1))
            .collect();
        r.shuffle(&mut cols);
        for v in cols.iter_mut() {
            if r.next() & 1 == 1 {
                *v = !*v;
            }
        }
        let offs: Vec<u32> = (0..=cols.len() as u32).collect();
        let m = Tcsr::new(ncols, offs, cols).unwrap();
        let want = m.transpose(Par::Seq);
        let dm = tessera_mesh::cuda::DeviceTcsr::upload(&g, &m).unwrap();
        let name = "rows of 1 to 20 entries in every bucket";
        for (kern, how) in [(&bucketed, "bucketed"), (&general, "general")] {
            transposes_match(&g, kern, how, &dm, &want, 20, name);
        }
    }
    // rows as δ3's input (every column at most once per sign):
    // - over 500,000 columns, but two columns with a second entry of one sign: half blocks
    //   fill most two-slot buckets, one each, and list the two whose slots collide for the
    //   general way;
    // - over 3,000,000 columns, none colliding: buckets too wide for two at a time, each
    //   drawn and written by the whole block (its rows through the warps' rings)
    for (nrows, ncols, collide) in [
        (200_000usize, 500_000usize, true),
        (100_000, 3_000_000, false),
    ] {
        let mut slots: Vec<u32> = (0..2 * ncols as u32).collect();
        r.shuffle(&mut slots);
        let mut free = slots.into_iter();
        let mut cols: Vec<i32> = Vec::with_capacity(4 * nrows);
        for _ in 0..nrows {
            let row = cols.len();
            while cols.len() < row + 4 {
                let v = free.next().unwrap();
                let c = (v >> 1) as i32;
                if !cols[row..].iter().any(|&x| (x ^ (x >> 31)) == c) {
                    cols.push(if v & 1 == 0 { c } else { !c });
                }
            }
        }
        let pairs = [(4 * 10, 4 * 20 + 1), (4 * 150_000 + 2, 4 * 190_000 + 3)];
        for (a, b) in pairs.into_iter().filter(|_| collide) {
            let row = a / 4 * 4;
            let cb = cols[b] ^ (cols[b] >> 31);
            assert!(!cols[row..row + 4].iter().any(|&x| (x ^ (x >> 31)) == cb));
            cols[a] = cols[b];
        }
        let offs: Vec<u32> = (0..=nrows as u32).map(|i| 4 * i).collect();
        let m = Tcsr::new(ncols, offs, cols).unwrap();
        let want = m.transpose(Par::Seq);
        let dm = tessera_mesh::cuda::DeviceTcsr::upload(&g, &m).unwrap();
        for (kern, how) in [(&bucketed, "bucketed"), (&general, "general")] {
            same_tcsr(
                &format!("short-row transpose ({how})"),
                &format!("{nrows} rows over {ncols} columns (colliding: {collide})"),
                &kern
                    .transpose_short_rows(&dm)
                    .unwrap()
                    .download(&g)
                    .unwrap(),
                &want,
            );
        }
    }
    // edge pairs: random edges, and vertex 0 joined to 40,000 of them
    for (ne, nv, hub) in [
        (300_000usize, 60_000u32, 0u32),
        (120_000, 50_000, 40_000),
        (3, 5, 0),
    ] {
        let mut ev: Vec<[u32; 2]> = Vec::new();
        for i in 0..ne {
            let a = if (i as u32) < hub {
                0
            } else {
                (r.next() % nv as u64) as u32
            };
            let mut b = (r.next() % nv as u64) as u32;
            if b == a {
                b = (a + 1) % nv;
            }
            ev.push(if r.next() & 1 == 0 { [a, b] } else { [b, a] });
        }
        let want = tessera_mesh::relations::transpose_edge_vertices(&ev, nv as usize, Par::Seq);
        let flat: Vec<u32> = ev.iter().flatten().copied().collect();
        let d_ev = g.upload(&flat).unwrap();
        let name = format!("{ne} random edges over {nv} vertices, hub of {hub}");
        for (kern, how) in [(&bucketed, "bucketed"), (&general, "general")] {
            same_tcsr(
                &format!("edge-pair transpose ({how})"),
                &name,
                &kern
                    .transpose_edge_pairs(&d_ev, nv as usize)
                    .unwrap()
                    .download(&g)
                    .unwrap(),
                &want,
            );
        }
    }
}

/// δ1 of canonical edge pairs (`from < to`, `from` non-decreasing, as Tessera derives the
/// edges of a simplex mesh): `transpose_bucketed`'s mode 3 transposes the `to` ends only and
/// writes each vertex's out-edges as a run. Against the CPU transpose, exactly: random
/// edges; vertices without edges (gaps, and the last ones); a vertex of more in-edges than
/// the kernel sorts (the flag, then the general sort); a star of out-edges; tiny inputs.
/// Pairs that are not canonical (one pair reversed, one `from` out of order) are refused
/// with nothing written, and `transpose_edge_pairs` still gives the reference.
#[test]
#[ignore = "needs a CUDA GPU"]
fn transpose_canonical_pairs_matches_reference() {
    let Some(g) = gpu() else { return };
    let kern = tessera_mesh::cuda::MeshKernels::with_options(&g, true, true).unwrap();
    assert!(
        kern.bucketed_transpose_grid().is_some(),
        "this device runs the bucketed transpose"
    );
    let mut r = Rng(977);
    let canonical = |mut ev: Vec<[u32; 2]>| {
        for p in ev.iter_mut() {
            if p[0] > p[1] {
                p.swap(0, 1);
            }
        }
        ev.retain(|p| p[0] != p[1]);
        ev.sort_unstable();
        ev.dedup();
        ev
    };
    let mut cases: Vec<(String, usize, Vec<[u32; 2]>)> = Vec::new();
    // the last two: sparse edges over many vertices (the widest buckets cut at upload), and more
    // edges than one tile a block holds beside the cut's tables
    for (ne, nv) in [
        (300_000usize, 60_000u32),
        (1_200_000, 235_000),
        (2_000, 100_000),
        (50_000, 1_000_000),
        (4_000_000, 1_500_000),
    ] {
        let ev = (0..ne)
            .map(|_| [(r.next() % nv as u64) as u32, (r.next() % nv as u64) as u32])
            .collect();
        cases.push((
            format!("{ne} random edges over {nv} vertices"),
            nv as usize,
            canonical(ev),
        ));
    }
    // only every third vertex has edges, and the last 1,000 none
    let ev = (0..100_000)
        .map(|_| {
            [
                3 * (r.next() % 10_000) as u32,
                3 * (r.next() % 10_000) as u32,
            ]
        })
        .collect();
    cases.push(("every third vertex".into(), 31_000, canonical(ev)));
    // the last vertex the `to` of 5,000 edges (a row longer than the kernel sorts)
    let mut ev: Vec<[u32; 2]> = (0..5_000u32).map(|v| [v, 20_000]).collect();
    ev.extend((0..50_000).map(|_| [(r.next() % 20_000) as u32, (r.next() % 20_000) as u32]));
    cases.push(("in-hub of 5,000".into(), 20_001, canonical(ev)));
    // vertex 0 the `from` of every edge
    cases.push((
        "out-star of 3,000".into(),
        3_001,
        (1..=3_000u32).map(|v| [0, v]).collect(),
    ));
    cases.push(("one edge".into(), 2, vec![[0, 1]]));
    cases.push(("one edge between gaps".into(), 6, vec![[1, 3]]));
    // not canonical: refused (nothing written), and the general transpose after it
    let mut reversed = cases[0].2.clone();
    reversed[12_345].swap(0, 1);
    let mut unordered = cases[0].2.clone();
    unordered.swap(100, 200_000);
    let nv0 = cases[0].1;
    let refused = [
        ("one pair reversed".to_string(), nv0, reversed),
        ("one from out of order".to_string(), nv0, unordered),
    ];
    for (k, (name, nv, ev)) in cases.iter().chain(refused.iter()).enumerate() {
        let want = tessera_mesh::relations::transpose_edge_vertices(ev, *nv, Par::Seq);
        let flat: Vec<u32> = ev.iter().flatten().copied().collect();
        let d_ev = g.upload(&flat).unwrap();
        let got = kern.transpose_canonical_pairs(&d_ev, *nv).unwrap();
        // a device mesh of these edges cuts δ1's buckets at upload for canonical pairs whose
        // vertices have at most 2048 in-edges (one face and one cell: only the shapes matter)
        let m = PolyMesh::from_operators(
            vec![[0.0; 3]; *nv],
            ev.clone(),
            Tcsr::new(ev.len(), vec![0, 1], vec![0]).unwrap(),
            Tcsr::new(1, vec![0, 1], vec![0]).unwrap(),
        )
        .unwrap();
        let dm = DeviceMesh::upload(&g, &m).unwrap();
        let cut = dm.edge_buckets();
        let want_cut = k < cases.len() && !name.starts_with("in-hub");
        assert_eq!(cut.is_some(), want_cut, "{name}: buckets cut at upload");
        same_tcsr(
            &format!("edge-pair transpose of a device mesh ({cut:?} buckets cut at upload)"),
            name,
            &dm.compute_vertex_edges().unwrap().download(&g).unwrap(),
            &want,
        );
        if k < cases.len() {
            let got = got.unwrap_or_else(|| panic!("{name}: canonical pairs refused"));
            same_tcsr(
                "canonical edge-pair transpose",
                name,
                &got.download(&g).unwrap(),
                &want,
            );
        } else {
            assert!(got.is_none(), "{name}: taken as canonical");
        }
        same_tcsr(
            "edge-pair transpose",
            name,
            &kern
                .transpose_edge_pairs(&d_ev, *nv)
                .unwrap()
                .download(&g)
                .unwrap(),
            &want,
        );
    }
}

/// The tetrahedra of `m` (its cell vertices, 4 a cell) with vertex v renamed `perm[v]`, over
/// `nv` vertices (positions at the origin past `m`'s), derived again as a simplex mesh: faces
/// canonical (§3.4.4) whatever the numbering.
fn tets_renamed(m: &PolyMesh, perm: &[u32], nv: usize) -> PolyMesh {
    let cv = m.cell_vertices();
    let cells: Vec<u32> = cv.columns().iter().map(|&v| perm[v as usize]).collect();
    assert_eq!(cells.len(), 4 * m.num_cells(), "tetrahedra");
    let mut pos = vec![[0.0; 3]; nv];
    for (v, p) in m.positions().iter().enumerate() {
        pos[perm[v] as usize] = *p;
    }
    SimplexMesh::new(3, cells, pos).unwrap().to_poly().unwrap()
}

/// δ2 of canonical faces (`DeviceMesh::edge_faces` and `compute_edge_faces` off the cached δ1
/// and the faces' runs, by the buckets cut at upload) against the CPU transpose, exactly:
/// tetrahedral meshes derived in numberings that put the work in few or many vertices, with
/// unused vertices, the smallest, random tetrahedra (high edge valences), a fan whose vertex 0
/// fits a task only in a block of 16 warps, and one whose vertex 0 does not fit a task (no cut,
/// the general transpose). Faces whose rows are not canonical get no cut and the general
/// transpose.
#[test]
#[ignore = "needs a CUDA GPU"]
fn edge_faces_canonical_matches_reference() {
    let Some(g) = gpu() else { return };
    let mut r = Rng(4242);
    // each case with the warps a block its tasks should be grouped for (None: not cut, the
    // general transpose)
    let mut cases: Vec<(String, PolyMesh, Option<u32>)> = Vec::new();
    let tet = |n: usize| box_mesh(BoxKind::Tet, [n, n, n], [1.0; 3]);
    let shuffled = |r: &mut Rng, n: usize| {
        let mut p: Vec<u32> = (0..n as u32).collect();
        r.shuffle(&mut p);
        p
    };
    for n in [3usize, 20, 60] {
        let m = tet(n);
        let nv = m.num_vertices();
        let id: Vec<u32> = (0..nv as u32).collect();
        cases.push((format!("tet box {n}^3"), tets_renamed(&m, &id, nv), Some(4)));
        let p = shuffled(&mut r, nv);
        cases.push((
            format!("tet box {n}^3, shuffled"),
            tets_renamed(&m, &p, nv),
            Some(4),
        ));
        // every third vertex used, the first and the last 100 unused
        let spread: Vec<u32> = (0..nv as u32).map(|v| 3 * v + 1).collect();
        cases.push((
            format!("tet box {n}^3, every third vertex"),
            tets_renamed(&m, &spread, 3 * nv + 100),
            Some(4),
        ));
    }
    // the bracket's numbering, and Morton order
    let b = bracket(40).unwrap();
    cases.push((
        "bracket(40)".into(),
        SimplexMesh::morton_ordered(&b).unwrap(),
        Some(4),
    ));
    cases.push((
        "one tetrahedron".into(),
        SimplexMesh::new(
            3,
            vec![0, 1, 2, 3],
            vec![[0.0; 3], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
        )
        .unwrap()
        .to_poly()
        .unwrap(),
        Some(4),
    ));
    for (nc, nv) in [(300_000usize, 40_000u32), (20_000, 2_000)] {
        let mut cells = Vec::with_capacity(4 * nc);
        while cells.len() < 4 * nc {
            let c: [u32; 4] = std::array::from_fn(|_| (r.next() % nv as u64) as u32);
            if (0..4).all(|i| !c[..i].contains(&c[i])) {
                cells.extend_from_slice(&c);
            }
        }
        let pos = (0..nv).map(|v| [v as f64, 0.0, 0.0]).collect();
        cases.push((
            format!("{nc} random tetrahedra over {nv} vertices"),
            SimplexMesh::new(3, cells, pos).unwrap().to_poly().unwrap(),
            Some(4),
        ));
    }
    // fans of tetrahedra (0, i, i + 1, i + 2): vertex 0's 2,002 out-edges and 4,001 own faces
    // (48 KB) fit a task only in a block of 16 warps; its 40,002 out-edges do not fit a task of
    // one warp (no cut, general transpose)
    let fan = |n: u32| {
        let cells: Vec<u32> = (1..=n).flat_map(|i| [0, i, i + 1, i + 2]).collect();
        let pos = (0..n + 3).map(|v| [v as f64, 0.0, 0.0]).collect();
        SimplexMesh::new(3, cells, pos).unwrap().to_poly().unwrap()
    };
    cases.push(("a fan of 2,000 tetrahedra".into(), fan(2_000), Some(16)));
    cases.push(("a fan of 40,000 tetrahedra".into(), fan(40_000), None));
    // rows rotated or reversed: not canonical
    cases.push((
        "tet box 20^3, rows permuted".into(),
        permuted_rows(tet(20)),
        None,
    ));
    for (name, m, want_warps) in &cases {
        let want = m.edge_faces();
        let mut dm = DeviceMesh::upload(&g, m).unwrap();
        assert_eq!(
            dm.face_block_warps(),
            *want_warps,
            "{name}: warps a block of the tasks cut at upload ({:?} blocks)",
            dm.face_buckets()
        );
        let want_cut = want_warps.is_some();
        // before δ1 is cached (the general transpose), then cached with δ1, then computed again
        // off the cached δ1
        same_tcsr(
            &format!("δ2, computed ({:?} buckets)", dm.face_buckets()),
            name,
            &dm.compute_edge_faces().unwrap().download(&g).unwrap(),
            want,
        );
        same_tcsr(
            "δ2, cached",
            name,
            &dm.edge_faces().unwrap().download(&g).unwrap(),
            want,
        );
        assert_eq!(
            dm.cached().contains(&"vertex_edges"),
            want_cut,
            "{name}: δ1 cached beside δ2 read off it"
        );
        same_tcsr(
            "δ2 from the cached δ1",
            name,
            &dm.compute_edge_faces().unwrap().download(&g).unwrap(),
            want,
        );
    }
}

/// `m` with every ∂2 row rotated (f % 3 == 1) or reversed (f % 3 == 0): loops to chain.
fn permuted_rows(m: PolyMesh) -> PolyMesh {
    let (pos, ev, fe, cf) = m.into_parts();
    let (ncols, offs, mut cols) = fe.into_raw();
    for f in 0..offs.len() - 1 {
        let row = &mut cols[offs[f] as usize..offs[f + 1] as usize];
        match f % 3 {
            0 => row.reverse(),
            1 => row.rotate_left(1),
            _ => {}
        }
    }
    PolyMesh::from_operators(pos, ev, Tcsr::new(ncols, offs, cols).unwrap(), cf).unwrap()
}

/// Faces of one length (triangles, quadrilaterals: one kernel that also writes the offsets,
/// rows out of loop order chained by the same thread) against the reference.
#[test]
#[ignore = "needs a CUDA GPU"]
fn face_vertices_uniform_matches_reference() {
    let Some(g) = gpu() else { return };
    for (name, m) in [
        (
            "tet box 9x7x5",
            box_mesh(BoxKind::Tet, [9, 7, 5], [1.0, 1.0, 1.0]),
        ),
        (
            "hex box 9x7x5",
            box_mesh(BoxKind::Hex, [9, 7, 5], [1.0, 1.0, 1.0]),
        ),
        (
            "tet box 6x5x4, rows permuted",
            permuted_rows(box_mesh(BoxKind::Tet, [6, 5, 4], [1.0, 1.0, 1.0])),
        ),
        (
            "hex box 6x5x4, rows permuted",
            permuted_rows(box_mesh(BoxKind::Hex, [6, 5, 4], [1.0, 1.0, 1.0])),
        ),
        ("fan of 100 tets", fan_mesh(100)),
        ("tet box 6x5x4 with two open faces", open_faces()),
    ] {
        let mut dm = DeviceMesh::upload(&g, &m).unwrap();
        assert!(dm.face_edges().uniform.is_some(), "{name}: uniform ∂2 rows");
        same_tcsr(
            "face vertices (uniform rows)",
            name,
            &dm.face_vertices().unwrap().download(&g).unwrap(),
            m.face_vertices(),
        );
    }
}

/// The boundary of a mesh large enough that its face list is copied out of the first
/// allocation (over 16 MiB of it would sit idle) rather than kept in it, against the CPU
/// reference; the same kernels twice, so the second call reuses the chain's scratch.
#[test]
#[ignore = "needs a CUDA GPU"]
fn boundary_of_a_large_mesh_matches_reference() {
    let Some(g) = gpu() else { return };
    let m = box_mesh(BoxKind::Tet, [64, 64, 64], [1.0, 1.0, 1.0]);
    assert!(
        2 * m.num_faces() * 4 > 17 << 20,
        "the face list must not be kept"
    );
    let want = extract_boundary(&m);
    let mut dm = DeviceMesh::upload(&g, &m).unwrap();
    for _ in 0..2 {
        let got = dm.boundary().unwrap();
        assert_eq!(got.faces.len(), want.faces.len());
        assert!(
            got.faces.capacity() == got.faces.len().max(1),
            "copied to its length"
        );
        same_boundary("tet box 64^3", &got.download(&g).unwrap(), &m);
    }
}

/// The boundary of a mesh with more faces than the one-launch kernel keeps the flags of in
/// registers (32 faces a lane of every warp of the grid): the flags go through global memory
/// there, and the lists still equal the CPU reference.
#[test]
#[ignore = "needs a CUDA GPU"]
fn boundary_with_face_flags_in_memory_matches_reference() {
    let Some(g) = gpu() else { return };
    let m = box_mesh(BoxKind::Tet, [80, 80, 80], [1.0, 1.0, 1.0]);
    let mut dm = DeviceMesh::upload(&g, &m).unwrap();
    let (_, grid) = dm.kernels().one_launch_grids().expect("one-launch chains");
    assert!(
        m.num_faces() > grid as usize * 8 * 32 * 32,
        "{} faces fit the registers of {grid} blocks",
        m.num_faces()
    );
    let got = dm.boundary().unwrap().download(&g).unwrap();
    same_boundary("tet box 80^3", &got, &m);
}

/// Two threads on one set of mesh kernels, one transposing (mapped flag, then the chains'
/// scratch) and one extracting boundaries (the same two locks): both finish with the
/// reference results (the locks are taken in one order).
#[test]
#[ignore = "needs a CUDA GPU"]
fn mesh_kernels_shared_by_two_threads() {
    let Some(g) = gpu() else { return };
    let m = box_mesh(BoxKind::Tet, [12, 10, 8], [1.0, 1.0, 1.0]);
    let dm = DeviceMesh::upload(&g, &m).unwrap();
    let k = dm.kernels();
    let fc = k.transpose_short_rows(dm.cell_faces()).unwrap();
    let want_b = extract_boundary(&m);
    std::thread::scope(|s| {
        s.spawn(|| {
            for _ in 0..200 {
                let t = k.transpose(dm.face_edges()).unwrap().download(&g).unwrap();
                assert_eq!(&t, m.edge_faces());
            }
        });
        s.spawn(|| {
            for _ in 0..200 {
                let b = k
                    .boundary(&fc, dm.face_edges(), dm.edge_vertices(), m.num_vertices())
                    .unwrap()
                    .download(&g)
                    .unwrap();
                assert_eq!(b.faces, want_b.faces);
            }
        });
    });
}

/// A tet box whose ∂2 rows keep 3 edges each but two faces' loops do not close (an edge
/// replaced by one far away): the uniform face kernel raises the (mapped) flag and the
/// general path compacts the shortened rows.
fn open_faces() -> PolyMesh {
    let m = box_mesh(BoxKind::Tet, [6, 5, 4], [1.0, 1.0, 1.0]);
    let fe = m.face_edges();
    let mut cols = fe.columns().to_vec();
    let ne = m.num_edges() as i32;
    cols[3 * 10 + 1] = ne - 1;
    cols[3 * 40 + 2] = !(ne - 2);
    let fe = Tcsr::new(fe.ncols(), fe.offsets().to_vec(), cols).unwrap();
    PolyMesh::from_operators(
        m.positions().to_vec(),
        m.edge_vertices().to_vec(),
        fe,
        m.cell_faces().clone(),
    )
    .unwrap()
}

/// The fixture does what the GPU test needs: uniform ∂2 rows, two face loops that do not close.
#[test]
fn open_faces_have_uniform_rows_and_short_loops() {
    let m = open_faces();
    assert!((0..m.num_faces()).all(|f| m.face_edges().row_len(f) == 3));
    let short = (0..m.num_faces())
        .filter(|&f| m.face_vertices().row_len(f) < 3)
        .count();
    assert_eq!(short, 2);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn face_vertices_matches_reference() {
    let Some(g) = gpu() else { return };
    for (name, m) in meshes() {
        let mut dm = DeviceMesh::upload(&g, &m).unwrap();
        same_tcsr(
            "face vertices",
            name,
            &dm.face_vertices().unwrap().download(&g).unwrap(),
            m.face_vertices(),
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cell_edges_matches_reference() {
    let Some(g) = gpu() else { return };
    for (name, m) in meshes() {
        let mut dm = DeviceMesh::upload(&g, &m).unwrap();
        same_tcsr(
            "cell edges",
            name,
            &dm.cell_edges().unwrap().download(&g).unwrap(),
            m.cell_edges(),
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cell_vertices_matches_reference() {
    let Some(g) = gpu() else { return };
    for (name, m) in meshes() {
        let mut dm = DeviceMesh::upload(&g, &m).unwrap();
        same_tcsr(
            "cell vertices",
            name,
            &dm.cell_vertices().unwrap().download(&g).unwrap(),
            m.cell_vertices(),
        );
    }
}

/// A tetrahedral box given as raw operators with its cells permuted, each ∂3 row shuffled and
/// some ∂2 rows out of loop order (two entries swapped), then validated: known closed by
/// validation rather than by construction.
fn shuffled_validated_tets(n: [usize; 3], seed: u64) -> PolyMesh {
    let (pos, ev, fe, cf) = box_mesh(BoxKind::Tet, n, [1.0, 1.0, 1.0]).into_parts();
    let mut r = Rng(seed);
    let nc = cf.nrows();
    let mut order: Vec<usize> = (0..nc).collect();
    r.shuffle(&mut order);
    let mut cols = Vec::with_capacity(cf.nnz());
    for &c in &order {
        let mut row = cf.row(c).to_vec();
        r.shuffle(&mut row);
        cols.extend(row);
    }
    let mut fe_cols = fe.columns().to_vec();
    for f in (0..fe.nrows()).step_by(3) {
        fe_cols.swap(3 * f, 3 * f + 2);
    }
    let cf = Tcsr::new(cf.ncols(), cf.offsets().to_vec(), cols).unwrap();
    let fe = Tcsr::new(fe.ncols(), fe.offsets().to_vec(), fe_cols).unwrap();
    let m = PolyMesh::from_operators(pos, ev, fe, cf).unwrap();
    assert!(!m.cells_known_closed());
    m.validate().unwrap();
    m
}

/// The closed-tetrahedra kernel of cell vertices (two faces and three edges a cell, no
/// check), which meshes known closed take, against the general CPU path (count, fill,
/// sort, deduplicate): tetrahedra from the builder and a validated mesh with shuffled rows.
#[test]
#[ignore = "needs a CUDA GPU"]
fn cell_vertices_of_closed_tets_matches_reference() {
    let Some(g) = gpu() else { return };
    for (name, m) in [
        (
            "tet box 30x30x30",
            box_mesh(BoxKind::Tet, [30, 30, 30], [1.0, 1.0, 1.0]),
        ),
        ("bracket(24)", bracket(24).unwrap()),
        (
            "validated tet box 23x17x11, shuffled rows",
            shuffled_validated_tets([23, 17, 11], 9),
        ),
    ] {
        assert!(m.cells_known_closed(), "{name}: known closed");
        let want = tessera_mesh::relations::cell_vertices_general(&m, Par::Seq);
        let mut dm = DeviceMesh::upload(&g, &m).unwrap();
        same_tcsr(
            "cell vertices of closed tetrahedra",
            name,
            &dm.cell_vertices().unwrap().download(&g).unwrap(),
            &want,
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn boundary_matches_reference() {
    let Some(g) = gpu() else { return };
    let mut saw_non_manifold = false;
    let launches = tessera_mesh::cuda::MeshKernels::with_chains(&g, false).unwrap();
    // one set of one-launch kernels for every mesh in turn: its marks, kept from call to
    // call, hold the marks of the meshes before (larger and smaller ones)
    let shared = tessera_mesh::cuda::MeshKernels::with_chains(&g, true).unwrap();
    for ((name, m), how) in meshes().into_iter().flat_map(|c| {
        [
            (c.clone(), "one launch"),
            (c.clone(), "one launch, shared kernels"),
            (c.clone(), "enqueued, shared kernels"),
            (c, "launches"),
        ]
    }) {
        let mut dm = DeviceMesh::upload(&g, &m).unwrap();
        let got = if how == "one launch" {
            assert!(dm.kernels().one_launch_chains());
            dm.boundary().unwrap()
        } else {
            let k = if how == "launches" {
                &launches
            } else {
                &shared
            };
            let fc = dm.kernels().transpose_short_rows(dm.cell_faces()).unwrap();
            if how == "enqueued, shared kernels" {
                let p = k
                    .boundary_enqueue(&fc, dm.face_edges(), dm.edge_vertices(), m.num_vertices())
                    .unwrap();
                let lengths = g.download(&p.lengths).unwrap();
                let b = p.finish(&g).unwrap();
                assert_eq!(
                    lengths,
                    lengths_words(b.faces.len(), b.edges.len(), b.vertices.len(), b.manifold),
                    "{name}: lengths on the device"
                );
                b
            } else {
                k.boundary(&fc, dm.face_edges(), dm.edge_vertices(), m.num_vertices())
                    .unwrap()
            }
        }
        .download(&g)
        .unwrap();
        let name = format!("{name} ({how})");
        let want = extract_boundary(&m);
        assert_eq!(got.manifold, want.manifold, "{name}: manifold flag");
        saw_non_manifold |= !want.manifold;
        for (what, a, b) in [
            (
                "faces",
                got.faces.iter().map(|&x| x as i64).collect::<Vec<_>>(),
                want.faces.iter().map(|&x| x as i64).collect::<Vec<_>>(),
            ),
            (
                "edges",
                got.edges.iter().map(|&x| x as i64).collect(),
                want.edges.iter().map(|&x| x as i64).collect(),
            ),
            (
                "vertices",
                got.vertices.iter().map(|&x| x as i64).collect(),
                want.vertices.iter().map(|&x| x as i64).collect(),
            ),
        ] {
            assert_eq!(a.len(), b.len(), "{name}: boundary {what} count");
            if let Some(i) = (0..a.len()).find(|&i| a[i] != b[i]) {
                panic!(
                    "{name}: boundary {what} differ first at {i}: gpu {} != reference {}",
                    a[i], b[i]
                );
            }
        }
    }
    assert!(
        saw_non_manifold,
        "the mesh set must contain non-manifold meshes"
    );
}

/// The four words [`tessera_mesh::cuda::PendingBoundary::lengths`] holds for lists of these
/// lengths.
fn lengths_words(faces: usize, edges: usize, vertices: usize, manifold: bool) -> Vec<u32> {
    vec![
        faces as u32,
        edges as u32,
        vertices as u32,
        u32::from(!manifold),
    ]
}

/// The CPU reference's boundary of `m` equals `got` (`name` in the messages).
fn same_boundary(name: &str, got: &Boundary, m: &PolyMesh) {
    let want = extract_boundary(m);
    assert_eq!(got.manifold, want.manifold, "{name}: manifold flag");
    assert_eq!(got.faces, want.faces, "{name}: boundary faces");
    assert_eq!(got.edges, want.edges, "{name}: boundary edges");
    assert_eq!(got.vertices, want.vertices, "{name}: boundary vertices");
}

/// Boundary extractions enqueued back to back on one set of kernels, none waited for until
/// all are enqueued (meshes larger and smaller in turn, so the kept marks grow while earlier
/// launches are in flight): each one's lengths on the device and its lists equal the CPU
/// reference. Between them, synchronous extractions, which return once their lengths are
/// final, before their launch ends (so the next launch clears the mapped words while the last
/// may still run): their lists, downloaded after all, equal it too.
#[test]
#[ignore = "needs a CUDA GPU"]
fn boundary_enqueued_back_to_back_matches_reference() {
    let Some(g) = gpu() else { return };
    let k = tessera_mesh::cuda::MeshKernels::with_chains(&g, true).unwrap();
    assert!(k.one_launch_chains());
    let mut cases = meshes();
    cases.push((
        "tet box 24x20x16",
        box_mesh(BoxKind::Tet, [24, 20, 16], [1.0, 1.0, 1.0]),
    ));
    cases.push((
        "tet box 3x3x3",
        box_mesh(BoxKind::Tet, [3, 3, 3], [1.0, 1.0, 1.0]),
    ));
    let mut pending = Vec::new();
    let mut held = Vec::new();
    let mut synchronous = Vec::new();
    for (name, m) in &cases {
        let dm = DeviceMesh::upload(&g, m).unwrap();
        let fc = k.transpose_short_rows(dm.cell_faces()).unwrap();
        let p = k
            .boundary_enqueue(&fc, dm.face_edges(), dm.edge_vertices(), m.num_vertices())
            .unwrap();
        pending.push((*name, m, p));
        let s = k
            .boundary(&fc, dm.face_edges(), dm.edge_vertices(), m.num_vertices())
            .unwrap();
        synchronous.push((*name, m, s));
        held.push((dm, fc)); // inputs live until their launches have run
    }
    for (name, m, s) in synchronous {
        same_boundary(name, &s.download(&g).unwrap(), m);
    }
    for (name, m, p) in pending {
        let lengths = g.download(&p.lengths).unwrap();
        let want = extract_boundary(m);
        assert_eq!(
            lengths,
            lengths_words(
                want.faces.len(),
                want.edges.len(),
                want.vertices.len(),
                want.manifold
            ),
            "{name}: lengths on the device"
        );
        same_boundary(name, &p.finish(&g).unwrap().download(&g).unwrap(), m);
    }
}

/// The one-launch boundary on grids of 1, 2, 3 and 5 blocks: each warp's runs of faces and
/// edges are then longer than it keeps in registers (32 faces and 64 edges a lane), so the
/// flags and the marks are read back from memory; with one block nothing is looked back at.
/// The lists equal the CPU reference, and the same kernels then give it on the full grid. The
/// tetrahedral box has canonical faces (their marks off two vertex pairs a face), the
/// non-manifold mesh not.
#[test]
#[ignore = "needs a CUDA GPU"]
fn boundary_in_small_grids_matches_reference() {
    let Some(g) = gpu() else { return };
    let mut cases = vec![(
        "tet box 20x20x20",
        box_mesh(BoxKind::Tet, [20, 20, 20], [1.0, 1.0, 1.0]),
    )];
    cases.extend(
        meshes()
            .into_iter()
            .filter(|(_, m)| !extract_boundary(m).manifold)
            .take(1),
    );
    assert_eq!(cases.len(), 2, "a non-manifold mesh among the cases");
    let big = &cases[0].1;
    assert!(
        big.num_faces() > 2 * 8 * 32 * 32 && big.num_edges() > 2 * 8 * 32 * 64,
        "2 blocks keep the flags of {} faces or the marks of {} edges in registers",
        big.num_faces(),
        big.num_edges()
    );
    for (i, (name, m)) in cases.iter().enumerate() {
        let mut dm = DeviceMesh::upload(&g, m).unwrap();
        // the tetrahedral box's faces are canonical: marks off two vertex pairs a face
        assert_eq!(
            dm.face_buckets().is_some(),
            i == 0,
            "{name}: canonical faces"
        );
        for blocks in [Some(1), Some(2), Some(3), Some(5), None] {
            dm.kernels().limit_boundary_grid(blocks);
            let name = format!("{name}, grid {blocks:?}");
            same_boundary(&name, &dm.boundary().unwrap().download(&g).unwrap(), m);
            let p = dm.boundary_enqueue().unwrap();
            same_boundary(&name, &p.finish(&g).unwrap().download(&g).unwrap(), m);
        }
    }
    // δ3 of another mesh: refused before any launch
    let a = DeviceMesh::upload(&g, &cases[0].1).unwrap();
    let b = DeviceMesh::upload(&g, &cases[1].1).unwrap();
    let fc_b = b.kernels().transpose_short_rows(b.cell_faces()).unwrap();
    assert!(a.boundary_from(&fc_b).is_err(), "δ3 of another mesh");
    assert!(
        a.boundary_enqueue_from(&fc_b).is_err(),
        "δ3 of another mesh"
    );
}

/// The boundary of meshes whose faces of 3 or 4 edges are not all closed loops (open paths,
/// an edge the wrong way round): the one-launch kernel marks a closed face's vertices once,
/// as tails of its oriented edges, and must fall back to both ends of every edge for the
/// others. Each open face has a vertex that only its fallback marks.
#[test]
#[ignore = "needs a CUDA GPU"]
fn boundary_of_open_face_loops_matches_reference() {
    let Some(g) = gpu() else { return };
    let points = |n: usize| (0..n).map(|i| [i as f64, (i * i) as f64, 0.0]).collect();
    // edges: 0 (0,1), 1 (1,2), 2 (2,3), 3 (0,2), 4 (3,4), 5 (0,3)
    let edges = vec![[0u32, 1], [1, 2], [2, 3], [0, 2], [3, 4], [0, 3]];
    // rows of signed columns, as `Tcsr::from_rows` takes them
    type Rows = Vec<Vec<(u32, i32)>>;
    let cases: [(&str, Rows); 4] = [
        // vertex 3 is only the head of edge 2
        ("open path 0-1-2-3", vec![vec![(0, 1), (1, 1), (2, 1)]]),
        // vertex 2 is only a head (of edges 1 and 3)
        ("edge the wrong way", vec![vec![(0, 1), (1, 1), (3, 1)]]),
        ("closed triangle", vec![vec![(0, 1), (1, 1), (3, -1)]]),
        // vertex 4 is only the head of edge 4; the quad is closed
        (
            "open path of four edges and a closed quad",
            vec![
                vec![(0, 1), (1, 1), (2, 1), (4, 1)],
                vec![(0, 1), (1, 1), (2, 1), (5, -1)],
            ],
        ),
    ];
    for (name, faces) in cases {
        let (nf, k) = (faces.len(), faces[0].len() as u32);
        let fe = Tcsr::from_rows(edges.len(), faces).unwrap();
        let cf = Tcsr::from_rows(nf, (0..nf as u32).map(|f| vec![(f, 1)])).unwrap();
        let m = PolyMesh::from_operators(points(5), edges.clone(), fe, cf).unwrap();
        let mut dm = DeviceMesh::upload(&g, &m).unwrap();
        assert!(dm.kernels().one_launch_chains());
        assert_eq!(
            dm.face_edges().uniform,
            Some(k),
            "{name}: rows of ∂2 of one length"
        );
        let got = dm.boundary().unwrap().download(&g).unwrap();
        let want = extract_boundary(&m);
        assert_eq!(got.faces, want.faces, "{name}: faces");
        assert_eq!(got.edges, want.edges, "{name}: edges");
        assert_eq!(got.vertices, want.vertices, "{name}: vertices");
    }
}

/// Smoothed positions `got` (GPU) equal `want` (CPU reference) to 1e-12 of `m`'s extent,
/// every coordinate finite.
fn assert_positions_close(name: &str, m: &PolyMesh, got: &[[f64; 3]], want: &[[f64; 3]]) {
    assert_eq!(got.len(), want.len(), "{name}");
    let extent = m
        .positions()
        .iter()
        .flat_map(|p| p.iter())
        .fold(0.0f64, |a, &x| a.max(x.abs()))
        .max(1.0);
    let tol = 1e-12 * extent;
    let mut worst = (0.0f64, 0usize);
    for (v, (a, b)) in got.iter().zip(want).enumerate() {
        for d in 0..3 {
            assert!(a[d].is_finite(), "{name}: vertex {v} not finite");
            let e = (a[d] - b[d]).abs();
            if e > worst.0 {
                worst = (e, v);
            }
        }
    }
    eprintln!(
        "{name}: largest position difference {:e} at vertex {} (tolerance {tol:e})",
        worst.0, worst.1
    );
    assert!(
        worst.0 <= tol,
        "{name}: smoothed vertex {} differs by {:e} > {tol:e}",
        worst.1,
        worst.0
    );
}

/// The smoothing's stencil in one launch (`MeshKernels::smoothing_stencil`): the fixed
/// vertices are exactly the CPU boundary's vertices (open, non-manifold and closed meshes),
/// the neighbour of every δ1 entry is the other end of its edge, and
/// `boundary_vertex_marks` (the same launch without δ1) gives the same marks.
#[test]
#[ignore = "needs a CUDA GPU"]
fn smoothing_stencil_matches_reference() {
    let Some(g) = gpu() else { return };
    let mut cases = meshes();
    cases.push((
        "tet box 12x10x8",
        box_mesh(BoxKind::Tet, [12, 10, 8], [1.0, 1.0, 1.0]),
    ));
    // δ1 of another mesh (its vertex count differs from most cases'): refused
    let other = box_mesh(BoxKind::Tet, [2, 2, 2], [1.0, 1.0, 1.0]);
    let dother = DeviceMesh::upload(&g, &other).unwrap();
    let ve_other = dother.compute_vertex_edges().unwrap();
    let mut refused = 0;
    for (name, m) in &cases {
        let dm = DeviceMesh::upload(&g, m).unwrap();
        let k = dm.kernels();
        let fc = k.transpose(dm.cell_faces()).unwrap();
        let ve = dm.compute_vertex_edges().unwrap();
        let nv = m.num_vertices();
        let (fixed, nbr) = k
            .smoothing_stencil(&fc, dm.face_edges(), dm.edge_vertices(), nv, &ve)
            .unwrap();
        let mut want = vec![0u32; nv];
        for &v in &extract_boundary(m).vertices {
            want[v as usize] = 1;
        }
        assert_eq!(g.download(&fixed).unwrap(), want, "{name}: fixed vertices");
        let marks = k
            .boundary_vertex_marks(&fc, dm.face_edges(), dm.edge_vertices(), nv)
            .unwrap();
        assert_eq!(g.download(&marks).unwrap(), want, "{name}: marks alone");
        let ev = m.edge_vertices();
        let want_nbr: Vec<u32> = m
            .vertex_edges()
            .columns()
            .iter()
            .map(|&c| {
                let [a, b] = ev[tcsr::col(c) as usize];
                if tcsr::is_neg(c) {
                    b
                } else {
                    a
                }
            })
            .collect();
        assert_eq!(g.download(&nbr).unwrap(), want_nbr, "{name}: neighbours");
        if other.num_vertices() != nv {
            assert!(
                k.smoothing_stencil(&fc, dm.face_edges(), dm.edge_vertices(), nv, &ve_other)
                    .is_err(),
                "{name}: another mesh's δ1"
            );
            refused += 1;
        }
    }
    assert!(refused > 0, "no case refused another mesh's δ1");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn laplacian_smoothing_matches_reference() {
    let Some(g) = gpu() else { return };
    let mut moved_somewhere = false;
    for (name, m) in meshes() {
        let iters = 10;
        let want = smoothed_positions(&m, iters);
        let mut dm = DeviceMesh::upload(&g, &m).unwrap();
        dm.laplacian_smooth(iters).unwrap();
        let got = dm.download_positions().unwrap();
        assert_positions_close(name, &m, &got, &want);
        // the stencil (fixed vertices, neighbours) is cached: 4 + 6 steps on a fresh
        // mesh, the second call on the cached stencil, give the same positions bit for bit
        let mut split = DeviceMesh::upload(&g, &m).unwrap();
        split.laplacian_smooth(4).unwrap();
        assert!(split.cached().contains(&"smoothing_stencil"), "{name}");
        split.laplacian_smooth(iters - 4).unwrap();
        assert_eq!(
            split.download_positions().unwrap(),
            got,
            "{name}: 4 + 6 steps"
        );
        // the GPU moves vertices exactly where the CPU does (thin meshes may have no inner vertex)
        let moved = |p: &[[f64; 3]]| p.iter().zip(m.positions()).filter(|(a, b)| a != b).count();
        assert_eq!(
            moved(&got),
            moved(&want),
            "{name}: number of moved vertices"
        );
        moved_somewhere |= moved(&want) > 0;
    }
    assert!(moved_somewhere, "some test mesh must have inner vertices");
}

/// `m` with every inner vertex moved by up to `amount` (relative to the mean edge length)
/// per axis, fixed seed: Laplacian moves then fold cells over, and safe smoothing has
/// moves to reject.
fn jittered(mut m: PolyMesh, amount: f64, seed: u64) -> PolyMesh {
    let fixed = extract_boundary(&m).vertex_mask(m.num_vertices());
    let ev = m.edge_vertices().to_vec();
    let p = m.positions().to_vec();
    let h = ev
        .iter()
        .map(|&[a, b]| {
            let (a, b) = (p[a as usize], p[b as usize]);
            ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2) + (a[2] - b[2]).powi(2)).sqrt()
        })
        .sum::<f64>()
        / ev.len().max(1) as f64;
    let mut r = Rng(seed);
    for (v, q) in m.positions_mut().iter_mut().enumerate() {
        if !fixed[v] {
            for x in q.iter_mut() {
                *x += amount * h * ((r.next() >> 11) as f64 / (1u64 << 53) as f64 - 0.5);
            }
        }
    }
    m
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn smooth_safe_matches_reference() {
    let Some(g) = gpu() else { return };
    let mut cases = meshes();
    cases.push((
        "jittered tet box 24x20x18",
        jittered(
            box_mesh(BoxKind::Tet, [24, 20, 18], [1.2, 1.0, 0.9]),
            0.6,
            7,
        ),
    ));
    cases.push((
        "jittered mixed box 11x9x8",
        jittered(
            box_mesh(BoxKind::Mixed, [11, 9, 8], [1.1, 0.9, 0.8]),
            0.5,
            11,
        ),
    ));
    cases.push(("dented tet box 10x10x6", {
        // a deep smooth dent in the top: plain smoothing folds cells here
        let mut m = box_mesh(BoxKind::Tet, [10, 10, 6], [1.0, 1.0, 1.0]);
        for p in m.positions_mut() {
            let phi = (-((p[0] - 0.5).powi(2) + (p[1] - 0.5).powi(2)) / 0.02).exp();
            p[2] *= 1.0 - 0.9 * phi;
        }
        m
    }));
    cases.push((
        "jittered bracket(30)",
        jittered(bracket(30).unwrap(), 0.5, 3),
    ));
    let mut rejected_somewhere = 0;
    for (name, m) in cases {
        for min_quality in [0.1, 0.3] {
            let iters = 8;
            let t0 = std::time::Instant::now();
            let setup = SafeSetup::new(&m, min_quality);
            let (want, want_stats) = safe_smoothed_positions(&m, &setup, iters);
            eprintln!(
                "{name} (min quality {min_quality}): CPU reference in {:?}, {} rounds",
                t0.elapsed(),
                want_stats.rounds
            );
            let mut dm = DeviceMesh::upload(&g, &m).unwrap();
            if min_quality > 0.2 {
                // the neighbours of the plain smoothing's cached stencil, not a launch of their own
                dm.require_smoothing_stencil().unwrap();
            }
            let got_stats = dm.safe_smooth(&setup, iters).unwrap();
            let got = dm.download_positions().unwrap();
            assert_eq!(got.len(), want.len(), "{name}");
            // identical arithmetic in the same order (no FMA): bit-identical positions
            let differ = got
                .iter()
                .zip(&want)
                .filter(|(a, b)| (0..3).any(|d| a[d].to_bits() != b[d].to_bits()))
                .count();
            eprintln!(
                "{name} (min quality {min_quality}): {} of {} moves rejected in {} rounds (CPU), {} differing vertices",
                want_stats.rejected_moves,
                want_stats.movable_vertices * iters as u64,
                want_stats.rounds,
                differ
            );
            assert_eq!(
                differ, 0,
                "{name}: {differ} vertices differ from the CPU reference"
            );
            assert_eq!(got_stats, want_stats, "{name}: rejection counts");
            rejected_somewhere += want_stats.rejected_moves;
        }
    }
    assert!(
        rejected_somewhere > 0,
        "some test mesh must have rejected moves"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_mesh_bench_runs() {
    let Some(g) = gpu() else { return };
    let m = bracket(24).unwrap();
    let rows = tessera_mesh::cuda::bench::run_gpu_mesh_bench(&g, &m, 20).unwrap();
    assert_eq!(
        rows.len(),
        14,
        "8 polyhedral rows, δ2 with its δ1 and by the general transpose, cell vertices with every cell checked, the boundary with its lengths on the device, the smoothing stencil and the simplex derivation (the bracket is tetrahedral)"
    );
    for (op, ms, bytes) in rows {
        eprintln!("{op:32} {ms:9.4} ms {bytes:>12} B");
        assert!(ms.is_finite() && ms >= 0.0 && bytes > 0, "{op}");
    }
}

/// Runs everywhere: the test meshes build, are above warp size where they should be, and
/// include both manifold and non-manifold inputs and rows longer than 64 entries.
#[test]
fn gpu_test_meshes_build() {
    let ms = meshes();
    for (name, m) in &ms {
        if !name.starts_with("non-manifold") {
            assert!(m.num_cells() > 32, "{name}: {} cells", m.num_cells());
        }
    }
    let fan = &ms[3].1;
    // the open-cell meshes really have open cells of one shape
    for kind in [BoxKind::Tet, BoxKind::Hex] {
        let m = open_cells(kind);
        let want = if kind == BoxKind::Tet { 4 } else { 8 };
        assert!(m.cell_vertices().row_len(3) > want);
        assert!(m.cell_vertices().row_len(7) > want);
        assert_eq!(m.cell_vertices().row_len(0), want);
    }
    assert!((0..fan.num_vertices()).any(|v| fan.vertex_edges().row_len(v) > 64));
    assert!(!extract_boundary(&ms[2].1).manifold);
    assert!(extract_boundary(&ms[0].1).manifold);
}

/// Tetrahedral and triangle meshes for the simplex derivation: converted generated meshes,
/// and the same tets with every cell's vertex order shuffled (both orientations, Eq. 3.14).
fn simplex_meshes() -> Vec<(&'static str, SimplexMesh)> {
    let tets =
        SimplexMesh::from_poly(&box_mesh(BoxKind::Tet, [16, 12, 10], [1.0, 1.0, 1.0])).unwrap();
    let mut r = Rng(7);
    let (_, cv, pos) = tets.clone().into_parts();
    let mut shuffled = cv.clone();
    for c in shuffled.chunks_mut(4) {
        r.shuffle(c);
    }
    // a triangle mesh: a jittered 40 x 30 grid, two triangles per square, random orientation
    let (nx, ny) = (40usize, 30usize);
    let mut tp = Vec::new();
    for j in 0..=ny {
        for i in 0..=nx {
            tp.push([i as f64, j as f64, 0.0]);
        }
    }
    let mut tris = Vec::new();
    for j in 0..ny {
        for i in 0..nx {
            let v = |a: usize, b: usize| (a + (nx + 1) * b) as u32;
            for mut t in [
                [v(i, j), v(i + 1, j), v(i + 1, j + 1)],
                [v(i, j), v(i + 1, j + 1), v(i, j + 1)],
            ] {
                if r.next() & 1 == 0 {
                    t.swap(0, 1);
                }
                tris.extend_from_slice(&t);
            }
        }
    }
    // 1200 tetrahedra around the edge (0, 1), with the vertex orders shuffled: one edge in
    // every cell, vertices 0 and 1 in 2400 edges
    let ring = 1200usize;
    let mut fan_pos = vec![[0.0, 0.0, 0.0], [0.0, 0.0, 1.0]];
    for i in 0..ring {
        let t = i as f64 / ring as f64 * std::f64::consts::TAU;
        fan_pos.push([t.cos(), t.sin(), 0.5]);
    }
    let mut fan = Vec::new();
    for i in 0..ring {
        let mut t = [0u32, 1, 2 + i as u32, 2 + ((i + 1) % ring) as u32];
        for k in (1..4).rev() {
            let j = (r.next() % (k as u64 + 1)) as usize;
            t.swap(k, j);
        }
        fan.extend_from_slice(&t);
    }
    vec![
        ("tet box 16x12x10", tets),
        (
            "fan of 1200 tets around one edge (long buckets)",
            SimplexMesh::new(3, fan, fan_pos).unwrap(),
        ),
        (
            "tet box with shuffled cell vertex orders",
            SimplexMesh::new(3, shuffled, pos).unwrap(),
        ),
        (
            "bracket(24) as simplex mesh",
            SimplexMesh::from_poly(&bracket(24).unwrap()).unwrap(),
        ),
        (
            "triangle grid 40x30",
            SimplexMesh::new(2, tris, tp).unwrap(),
        ),
    ]
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn simplex_derivation_matches_reference() {
    let Some(g) = gpu() else { return };
    for (name, sm) in simplex_meshes() {
        let d = tessera_mesh::cuda::simplex::derive(&g, &sm).unwrap();
        assert_eq!(d.download_edges(&g).unwrap(), sm.edges(), "{name}: edges");
        assert_eq!(d.download_faces(&g).unwrap(), sm.faces(), "{name}: faces");
        assert_eq!(
            g.download(&d.cell_edges).unwrap(),
            sm.cell_edges_array(),
            "{name}: cell edges"
        );
        assert_eq!(
            g.download(&d.cell_faces).unwrap(),
            sm.cell_faces_array(),
            "{name}: cell faces"
        );
        assert_eq!(
            g.download(&d.cell_facets).unwrap(),
            sm.cell_facets(),
            "{name}: cell facets (Eq. 3.14)"
        );
        assert_eq!(
            g.download(&d.face_edges).unwrap(),
            sm.face_edges(),
            "{name}: face edges"
        );
    }
}

#[test]
fn simplex_test_meshes_build() {
    let ms = simplex_meshes();
    assert!(ms.iter().all(|(_, m)| m.num_cells() > 32));
    assert_eq!(ms[1].1.num_edges(), 1 + 2 * 1200 + 1200);
    // shuffling produced cells of both orientations
    let neg: Vec<bool> = ms[2]
        .1
        .cell_facets()
        .iter()
        .step_by(4)
        .map(|&v| v < 0)
        .collect();
    assert!(
        neg.iter().any(|&n| n) && neg.iter().any(|&n| !n),
        "facet 0 must have both signs"
    );
}

/// The relations the shared-mesh benchmark does not compare (face vertices, δ2, δ1 and the
/// smoothing) on the shared meshes carried to the device (skipped when absent).
#[test]
#[ignore = "needs a CUDA GPU"]
fn shared_mesh_relations_match_reference() {
    let Some(g) = gpu() else { return };
    for name in ["bunny-50k.msh.gz", "dragon-817k.msh.gz"] {
        let path = std::path::Path::new(".device/data").join(name);
        if !path.exists() {
            eprintln!("{name}: not present, skipped");
            continue;
        }
        let m = tessera_mesh::io::read_mesh(&path).unwrap().mesh;
        let mut dm = DeviceMesh::upload(&g, &m).unwrap();
        same_tcsr(
            "face vertices",
            name,
            &dm.face_vertices().unwrap().download(&g).unwrap(),
            m.face_vertices(),
        );
        same_tcsr(
            "δ2",
            name,
            &dm.edge_faces().unwrap().download(&g).unwrap(),
            m.edge_faces(),
        );
        same_tcsr(
            "δ1",
            name,
            &dm.vertex_edges().unwrap().download(&g).unwrap(),
            m.vertex_edges(),
        );
        let want = smoothed_positions(&m, 10);
        dm.laplacian_smooth(10).unwrap();
        let got = dm.download_positions().unwrap();
        eprintln!("{name}: relations equal");
        assert_positions_close(name, &m, &got, &want);
    }
}

/// A benchmark mesh of `.device/data/` (the device machine, where `device-pack --data` puts
/// it) or `../shared/meshes`, if either has it.
fn shared_mesh_path(name: &str) -> Option<std::path::PathBuf> {
    [
        std::path::PathBuf::from(".device/data"),
        std::path::PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../shared/meshes"
        )),
    ]
    .iter()
    .map(|d| d.join(name))
    .find(|p| p.exists())
}

/// Benchmark meshes of `../shared/meshes` (or `.device/data/` on the device machine, where
/// `device-pack --data` puts them): the GPU columns of Tables 3.2-3.4 with the bytes each
/// operation must move and the fraction of 3.0 TB/s, plus a conformance check of the
/// relations and the boundary on the real meshes. Tetrahedral meshes run twice: as
/// numbered in their files and renumbered along a Morton curve. Skips meshes that are
/// absent.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_mesh_bench_shared_meshes() {
    let Some(g) = gpu() else { return };
    // dissertation GPU times (GTX 1080), Tables 3.2 and 3.3, in the order of the bench rows
    let diss: [(&str, [f64; 3]); 8] = [
        ("coboundary d3 (face_cells)", [0.22, 0.70, 14.0]),
        ("coboundary d2 (edge_faces)", [0.20, 1.17, 7.02]),
        ("coboundary d1 (vertex_edges)", [0.72, 0.58, 4.11]),
        ("face_vertices", [0.12, 0.44, 1.88]),
        ("cell_edges", [0.98, 22.2, 237.0]),
        ("cell_vertices", [2.72, 25.1, 261.0]),
        ("boundary", [1.13, 1.15, 2.83]),
        ("laplacian smoothing x10", [f64::NAN, f64::NAN, f64::NAN]),
    ];
    for (mi, name) in [
        "armadillo-3k.msh.gz",
        "bunny-50k.msh.gz",
        "dragon-817k.msh.gz",
    ]
    .iter()
    .enumerate()
    {
        let Some(path) = shared_mesh_path(name) else {
            eprintln!("{name}: not present, skipped");
            continue;
        };
        let file_mesh = tessera_mesh::io::read_mesh(&path).unwrap().mesh;
        // the mesh as numbered in its file, then (tetrahedral meshes) the same mesh
        // renumbered for locality: what the numbering costs the gathers and scatters
        let morton = SimplexMesh::morton_ordered(&file_mesh).ok();
        for (m, order) in
            std::iter::once((file_mesh, "")).chain(morton.map(|m| (m, " (Morton order)")))
        {
            let name = &*format!("{name}{order}");
            // conformance on the real mesh
            let mut dm = DeviceMesh::upload(&g, &m).unwrap();
            same_tcsr(
                "δ3",
                name,
                &dm.face_cells().unwrap().download(&g).unwrap(),
                m.face_cells(),
            );
            assert!(
                dm.face_buckets().is_some(),
                "{name}: δ2's buckets cut at upload"
            );
            same_tcsr(
                "δ2",
                name,
                &dm.edge_faces().unwrap().download(&g).unwrap(),
                m.edge_faces(),
            );
            // against the CPU path that checks every cell (the meshes are known closed, so
            // both the GPU and `m.cell_vertices()` take the closed path)
            assert!(m.cells_known_closed(), "{name}: known closed");
            same_tcsr(
                "cell vertices",
                name,
                &dm.cell_vertices().unwrap().download(&g).unwrap(),
                &tessera_mesh::relations::cell_vertices_checked(&m, Par::Rayon),
            );
            same_tcsr(
                "cell edges",
                name,
                &dm.cell_edges().unwrap().download(&g).unwrap(),
                m.cell_edges(),
            );
            assert_eq!(
                dm.boundary().unwrap().download(&g).unwrap(),
                extract_boundary(&m),
                "{name}: boundary"
            );
            drop(dm);
            let rows = tessera_mesh::cuda::bench::run_gpu_mesh_bench(&g, &m, 30).unwrap();
            eprintln!(
                "\n{name}: V {} E {} F {} C {} on {}",
                m.num_vertices(),
                m.num_edges(),
                m.num_faces(),
                m.num_cells(),
                g.describe()
            );
            eprintln!(
                "{:46} {:>10} {:>12} {:>9} {:>8} {:>14}",
                "op", "median ms", "bytes", "GB/s", "of 3TB/s", "diss. GPU ms"
            );
            for (op, ms, bytes) in rows {
                let gbs = bytes as f64 / (ms * 1e-3) / 1e9;
                let d = diss
                    .iter()
                    .find(|x| x.0 == op)
                    .map(|x| x.1[mi])
                    .unwrap_or(f64::NAN);
                eprintln!(
                    "{op:46} {ms:10.4} {bytes:12} {gbs:9.1} {:7.2}% {d:14.2}",
                    100.0 * gbs / 3000.0
                );
            }
        }
    }
}

/// Phase times of the one-launch chains on the dragon (block 0's `%globaltimer` after each
/// grid barrier, and "tail": from block 0's end to the last block's; the median of 10 runs
/// per phase): where the time of the transposes and the boundary extraction goes. Skips
/// when the mesh is absent.
#[test]
#[ignore = "needs a CUDA GPU"]
fn one_launch_chain_phases_shared_meshes() {
    let Some(g) = gpu() else { return };
    let name = "dragon-817k.msh.gz";
    let Some(path) = shared_mesh_path(name) else {
        eprintln!("{name}: not present, skipped");
        return;
    };
    let file_mesh = tessera_mesh::io::read_mesh(&path).unwrap().mesh;
    let morton = SimplexMesh::morton_ordered(&file_mesh).unwrap();
    for (m, order) in [(file_mesh, "file order"), (morton, "Morton order")] {
        eprintln!("{name}, {order}:");
        chain_phases(&g, &m);
    }
}

fn chain_phases(g: &Gpu, m: &PolyMesh) {
    let mut dm = DeviceMesh::upload(g, m).unwrap();
    dm.require_face_cells().unwrap();
    let nv = m.num_vertices();
    let k = dm.kernels();
    if !k.one_launch_chains() {
        eprintln!("one-launch chains off (TESSERA_MESH_CHAINS=launches): nothing to show");
        return;
    }
    eprintln!(
        "one-launch grids (transpose, boundary): {:?} blocks of 256 on {} SMs",
        k.one_launch_grids(),
        g.sm_count()
    );
    let fc = k.transpose_short_rows(dm.cell_faces()).unwrap();
    let bucketed = k.bucketed_transpose_grid();
    eprintln!("bucketed transpose: {bucketed:?} blocks of 1024");
    let (d3, d21) = if bucketed.is_some() {
        (
            "δ3 (bucketed: tiles, buckets, tail)",
            "(bucketed: tiles, buckets, tail)",
        )
    } else {
        (
            "δ3 (two slots: init, scatter, scan sums, scan+rows, tail)",
            "(zero, count, scan sums, scan, fill, short sort, mid sort, tail)",
        )
    };
    let (d2, d1) = (format!("δ2 {d21}"), format!("δ1 {d21}"));
    let d1c = format!("δ1, buckets cut at upload {d21}");
    assert!(
        bucketed.is_none() || dm.face_buckets().is_some(),
        "the dragon's faces get buckets cut at upload"
    );
    assert!(
        bucketed.is_none() || dm.edge_buckets().is_some(),
        "the dragon's edges get buckets cut at upload"
    );
    let ops: [(&str, &dyn Fn()); 5] = [
        (d3, &|| {
            k.transpose_short_rows(dm.cell_faces()).map(drop).unwrap()
        }),
        (&d2, &|| k.transpose(dm.face_edges()).map(drop).unwrap()),
        (&d1, &|| {
            k.transpose_edge_pairs(dm.edge_vertices(), nv)
                .map(drop)
                .unwrap()
        }),
        (&d1c, &|| dm.compute_vertex_edges().map(drop).unwrap()),
        (
            "boundary (flags and marks; the faces', edges' and vertices' lists; tail)",
            &|| dm.boundary_from(&fc).map(drop).unwrap(),
        ),
    ];
    for (op, f) in ops {
        let mut runs: Vec<Vec<f64>> = Vec::new();
        for _ in 0..13 {
            f();
            runs.push(k.last_chain_phases_ms().unwrap());
        }
        let runs = &runs[3..];
        let phases = runs.iter().map(Vec::len).min().unwrap_or(0);
        let med: Vec<f64> = (0..phases)
            .map(|p| {
                let mut v: Vec<f64> = runs.iter().map(|r| r[p]).collect();
                tessera_gpu::median(&mut v)
            })
            .collect();
        let shown: Vec<String> = med.iter().map(|m| format!("{m:.4}")).collect();
        eprintln!(
            "phases {op}: [{}] ms, sum {:.4} ms",
            shown.join(", "),
            med.iter().sum::<f64>()
        );
    }
}

/// Where the time of a standalone mesh op goes beyond its kernels (the dragon, when the
/// shared meshes are present): the bench's event median, the host's wall clock for the
/// call alone and with the synchronisation after it, and the event time per call of 10
/// calls back to back (host work of one call overlapping the kernels of the last).
#[test]
#[ignore = "needs a CUDA device and the shared meshes"]
fn op_overheads_shared_meshes() {
    let Some(g) = gpu() else { return };
    let name = "dragon-817k.msh.gz";
    let Some(path) = shared_mesh_path(name) else {
        eprintln!("{name}: not present, skipped");
        return;
    };
    let m = tessera_mesh::io::read_mesh(&path).unwrap().mesh;
    let mut dm = DeviceMesh::upload(&g, &m).unwrap();
    dm.require_face_cells().unwrap();
    let nv = m.num_vertices();
    // δ2 off δ1: first with δ1 computed in the call, then (below) off the cached one
    let d2_with_d1 = g
        .median_ms(21, 3, || {
            dm.compute_edge_faces().map(drop).unwrap();
            Ok(())
        })
        .unwrap();
    eprintln!("δ2 with its δ1 (nothing cached): event {d2_with_d1:.4} ms");
    dm.require_vertex_edges().unwrap();
    let k = dm.kernels();
    let fc = k.transpose_short_rows(dm.cell_faces()).unwrap();
    let ops: [(&str, &dyn Fn()); 10] = [
        ("δ3", &|| {
            k.transpose_short_rows(dm.cell_faces()).map(drop).unwrap()
        }),
        ("δ2", &|| k.transpose(dm.face_edges()).map(drop).unwrap()),
        ("δ2, off δ1", &|| {
            dm.compute_edge_faces().map(drop).unwrap()
        }),
        ("δ1", &|| {
            k.transpose_edge_pairs(dm.edge_vertices(), nv)
                .map(drop)
                .unwrap()
        }),
        ("δ1, cut", &|| dm.compute_vertex_edges().map(drop).unwrap()),
        ("face vertices", &|| {
            k.face_vertices(dm.face_edges(), dm.edge_vertices(), nv)
                .map(drop)
                .unwrap()
        }),
        ("cell edges", &|| {
            k.cell_edges(dm.cell_faces(), dm.face_edges())
                .map(drop)
                .unwrap()
        }),
        ("cell vertices", &|| {
            k.cell_vertices(dm.cell_faces(), dm.face_edges(), dm.edge_vertices(), nv)
                .map(drop)
                .unwrap()
        }),
        ("boundary", &|| dm.boundary_from(&fc).map(drop).unwrap()),
        ("boundary, enq.", &|| {
            dm.boundary_enqueue_from(&fc).map(drop).unwrap()
        }),
    ];
    eprintln!("op              event ms   host call ms  host+sync ms  back-to-back ms/call");
    for (op, f) in ops {
        let ev = g
            .median_ms(21, 3, || {
                f();
                Ok(())
            })
            .unwrap();
        let (mut call, mut synced) = (Vec::new(), Vec::new());
        for _ in 0..21 {
            let t = std::time::Instant::now();
            f();
            call.push(t.elapsed().as_secs_f64() * 1e3);
            g.synchronize().unwrap();
            synced.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let b2b = g
            .median_ms(7, 1, || {
                for _ in 0..10 {
                    f();
                }
                Ok(())
            })
            .unwrap()
            / 10.0;
        eprintln!(
            "{op:<15} {ev:>9.4} {:>13.4} {:>13.4} {b2b:>13.4}",
            tessera_gpu::median(&mut call),
            tessera_gpu::median(&mut synced)
        );
    }
}
