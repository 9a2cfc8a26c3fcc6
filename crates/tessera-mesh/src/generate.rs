//! Procedural meshes for tests, demos and benchmarks (no files needed).
//!
//! - [`box_mesh`]: a box of `n[0] x n[1] x n[2]` voxels split into tetrahedra (6 Kuhn
//!   tetrahedra per voxel), hexahedra, or a conforming mix of hexahedra, prisms, pyramids
//!   and tetrahedra ([`BoxKind::Mixed`]);
//! - [`voxel_mesh`]: the same for any subset of the voxels (a box with a hole, ...);
//! - [`bracket`]: a mechanical bracket (a plate with four bolt holes and an upright rib with
//!   a load hole), voxelized and split conformingly into tetrahedra, with its
//!   [`BracketGeometry`] for selecting boundary-condition faces;
//! - [`non_manifold_example`]: two hexahedra sharing only an edge, plus a free face.
//!
//! All meshes go through [`PolyMeshBuilder`] (canonical numbering, outward orientation by
//! signed volume), so a generated mesh equals the same mesh read from a file.
//!
//! **Kuhn split.** Voxel `(i, j, k)` with corners `c(dx, dy, dz)` is split into the six
//! tetrahedra `[c000, c000 + e_a, c000 + e_a + e_b, c111]` for the six orders `(a, b)` of
//! the axes. Restricted to a voxel face this is the split along the face diagonal from its
//! lowest to its highest corner, the same from both sides, so neighbouring voxels conform.

use crate::{CellType, MeshError, Point, PolyMesh, PolyMeshBuilder};
use rayon::prelude::*;
use tessera_core::Par;

/// Cell types of a generated box (dissertation §3.3: general polyhedral, mixed meshes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BoxKind {
    /// Six Kuhn tetrahedra per voxel.
    Tet,
    /// One hexahedron per voxel.
    Hex,
    /// Hexahedra, prisms, pyramids and tetrahedra in one conforming mesh. With
    /// `a = ceil(n0 / 2)`, `b = ceil(n1 / 2)`, voxel `(i, j, k)` is
    /// - `i < a, j < b`: six Kuhn tetrahedra (all faces triangulated);
    /// - `i >= a, j < b`: two prisms along x (triangles on the x-faces, matching the Kuhn
    ///   diagonals; quads on the y- and z-faces);
    /// - `i < a, j >= b`: two prisms along y (triangles on the y-faces);
    /// - `i >= a, j >= b`: a hexahedron when `i + j + k` is even, otherwise six pyramids
    ///   around an added voxel-centre vertex (all faces quads).
    ///
    /// All four types appear when `n0 >= 2` and `n1 >= 2`.
    Mixed,
}

// local voxel corners: d = dx + 2 dy + 4 dz
const KUHN: [[usize; 4]; 6] = [
    [0, 1, 3, 7],
    [0, 1, 5, 7],
    [0, 2, 3, 7],
    [0, 2, 6, 7],
    [0, 4, 5, 7],
    [0, 4, 6, 7],
];
const HEX: [usize; 8] = [0, 1, 3, 2, 4, 5, 7, 6];
const PRISM_X: [[usize; 6]; 2] = [[0, 2, 6, 1, 3, 7], [0, 6, 4, 1, 7, 5]];
const PRISM_Y: [[usize; 6]; 2] = [[0, 1, 5, 2, 3, 7], [0, 5, 4, 2, 7, 6]];
const VOXEL_FACES: [[usize; 4]; 6] = [
    [0, 2, 6, 4],
    [1, 3, 7, 5],
    [0, 1, 5, 4],
    [2, 3, 7, 6],
    [0, 1, 3, 2],
    [4, 5, 7, 6],
];

/// Cells as types plus concatenated vertex lists (ids before compaction).
#[derive(Default)]
struct CellList {
    types: Vec<CellType>,
    verts: Vec<u64>,
}

impl CellList {
    fn push(&mut self, ty: CellType, v: impl IntoIterator<Item = u64>) {
        self.types.push(ty);
        self.verts.extend(v);
    }
}

/// A structured voxel grid: `n` voxels of size `h` from `origin`. Vertex ids: grid points
/// `i + (n0 + 1) (j + (n1 + 1) k)`, then voxel centres `ngrid + i + n0 (j + n1 k)`.
struct Grid {
    n: [usize; 3],
    origin: Point,
    h: [f64; 3],
}

impl Grid {
    fn ngrid(&self) -> u64 {
        (self.n[0] as u64 + 1) * (self.n[1] as u64 + 1) * (self.n[2] as u64 + 1)
    }
    fn nvoxels(&self) -> u64 {
        self.n[0] as u64 * self.n[1] as u64 * self.n[2] as u64
    }
    fn corner_ids(&self, i: usize, j: usize, k: usize) -> [u64; 8] {
        let sx = 1u64;
        let sy = self.n[0] as u64 + 1;
        let sz = sy * (self.n[1] as u64 + 1);
        let b = i as u64 + sy * j as u64 + sz * k as u64;
        std::array::from_fn(|d| {
            b + sx * (d & 1) as u64 + sy * ((d >> 1) & 1) as u64 + sz * ((d >> 2) & 1) as u64
        })
    }
    fn centre_id(&self, i: usize, j: usize, k: usize) -> u64 {
        self.ngrid() + i as u64 + self.n[0] as u64 * (j as u64 + self.n[1] as u64 * k as u64)
    }
    fn position(&self, id: u64) -> Point {
        let ng = self.ngrid();
        if id < ng {
            let sx = self.n[0] as u64 + 1;
            let sy = self.n[1] as u64 + 1;
            let (i, r) = (id % sx, id / sx);
            let (j, k) = (r % sy, r / sy);
            [
                self.origin[0] + i as f64 * self.h[0],
                self.origin[1] + j as f64 * self.h[1],
                self.origin[2] + k as f64 * self.h[2],
            ]
        } else {
            let c = id - ng;
            let (i, r) = (c % self.n[0] as u64, c / self.n[0] as u64);
            let (j, k) = (r % self.n[1] as u64, r / self.n[1] as u64);
            [
                self.origin[0] + (i as f64 + 0.5) * self.h[0],
                self.origin[1] + (j as f64 + 0.5) * self.h[1],
                self.origin[2] + (k as f64 + 0.5) * self.h[2],
            ]
        }
    }
    fn emit(&self, kind: BoxKind, i: usize, j: usize, k: usize, out: &mut CellList) {
        let c = self.corner_ids(i, j, k);
        let tets = |out: &mut CellList| {
            for t in KUHN {
                out.push(CellType::Tetrahedron, t.map(|d| c[d]));
            }
        };
        match kind {
            BoxKind::Tet => tets(out),
            BoxKind::Hex => out.push(CellType::Hexahedron, HEX.map(|d| c[d])),
            BoxKind::Mixed => {
                let a = self.n[0].div_ceil(2);
                let b = self.n[1].div_ceil(2);
                match (i < a, j < b) {
                    (true, true) => tets(out),
                    (false, true) => PRISM_X
                        .iter()
                        .for_each(|p| out.push(CellType::Prism, p.map(|d| c[d]))),
                    (true, false) => PRISM_Y
                        .iter()
                        .for_each(|p| out.push(CellType::Prism, p.map(|d| c[d]))),
                    (false, false) => {
                        if (i + j + k) % 2 == 0 {
                            out.push(CellType::Hexahedron, HEX.map(|d| c[d]));
                        } else {
                            let apex = self.centre_id(i, j, k);
                            for f in VOXEL_FACES {
                                out.push(
                                    CellType::Pyramid,
                                    f.map(|d| c[d]).into_iter().chain([apex]),
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Mesh the voxels `v` of an `n[0] x n[1] x n[2]` grid (voxel size `spacing`, first corner
/// at `origin`) for which `keep(v)` holds, each voxel split as `kind` says. Only vertices of
/// kept voxels are part of the mesh (numbered in grid order). The result is conforming
/// (neighbouring voxels share their faces exactly) and every cell has positive volume.
pub fn voxel_mesh<F>(
    kind: BoxKind,
    n: [usize; 3],
    origin: Point,
    spacing: [f64; 3],
    keep: F,
) -> Result<PolyMesh, MeshError>
where
    F: Fn([usize; 3]) -> bool + Sync,
{
    if !spacing.iter().all(|h| h.is_finite() && *h > 0.0) || !origin.iter().all(|x| x.is_finite()) {
        return Err(MeshError::Unsupported(format!(
            "voxel grid needs a finite origin and positive spacing, got origin {origin:?}, spacing {spacing:?}"
        )));
    }
    let grid = Grid {
        n,
        origin,
        h: spacing,
    };
    let cells_per_voxel: u64 = if kind == BoxKind::Hex { 1 } else { 6 };
    if grid.ngrid() + grid.nvoxels() > u32::MAX as u64 / 2
        || grid.nvoxels() * cells_per_voxel * 6 > u32::MAX as u64
    {
        return Err(MeshError::Unsupported(format!(
            "voxel grid {n:?} exceeds 32-bit mesh indices"
        )));
    }
    // 1. cells, per z-slab in parallel (concatenated in slab order: deterministic)
    let slab = |k: usize| {
        let mut out = CellList::default();
        for j in 0..n[1] {
            for i in 0..n[0] {
                if keep([i, j, k]) {
                    grid.emit(kind, i, j, k, &mut out);
                }
            }
        }
        out
    };
    let slabs: Vec<CellList> = (0..n[2]).into_par_iter().map(slab).collect();
    let ncells: usize = slabs.iter().map(|s| s.types.len()).sum();
    let nverts: usize = slabs.iter().map(|s| s.verts.len()).sum();
    let mut types = Vec::with_capacity(ncells);
    let mut verts = Vec::with_capacity(nverts);
    for s in slabs {
        types.extend(s.types);
        verts.extend(s.verts);
    }
    // 2. compact the vertex ids to the used ones, in grid order
    let nid = (grid.ngrid() + grid.nvoxels()) as usize;
    let mut remap = vec![0u32; nid];
    for &v in &verts {
        remap[v as usize] = 1;
    }
    let mut positions = Vec::new();
    let mut next = 0u32;
    for (id, r) in remap.iter_mut().enumerate() {
        if *r != 0 {
            *r = next;
            next += 1;
            positions.push(grid.position(id as u64));
        }
    }
    let verts: Vec<u32> = verts
        .par_iter()
        .with_min_len(1 << 14)
        .map(|&v| remap[v as usize])
        .collect();
    drop(remap);
    // 3. build
    let mut b = PolyMeshBuilder::new(positions);
    let mut o = 0;
    for ty in types {
        let k = ty.num_vertices().expect("standard cell");
        b.add_typed_cell(ty, &verts[o..o + k])?;
        o += k;
    }
    b.build(Par::auto())
}

/// A box `[0, extent]` of `n[0] x n[1] x n[2]` voxels of the given kind (see [`BoxKind`]).
/// Counts for [`BoxKind::Hex`]: `V = (n0+1)(n1+1)(n2+1)`, `C = n0 n1 n2`; for
/// [`BoxKind::Tet`] `C = 6 n0 n1 n2`. The Euler characteristic is 1.
///
/// # Panics
/// If `extent` is not finite and positive, or the mesh would exceed 32-bit indices
/// (use [`voxel_mesh`] for a `Result`).
pub fn box_mesh(kind: BoxKind, n: [usize; 3], extent: [f64; 3]) -> PolyMesh {
    let spacing = std::array::from_fn(|d| extent[d] / n[d].max(1) as f64);
    voxel_mesh(kind, n, [0.0; 3], spacing, |_| true)
        .expect("box_mesh needs a positive extent and a size within 32-bit indices")
}

/// Geometry of the mechanical bracket of [`bracket`], in mm: a base plate with four
/// vertical bolt holes and an upright rib (a wall along x, centred in y) with a load hole
/// along y. Use it to select boundary-condition faces geometrically: faces on the bolt-hole
/// walls (fixed) with [`BracketGeometry::bolt_hole_at`], faces on the load-hole wall with
/// [`BracketGeometry::on_load_hole`]; a tolerance of `voxel_size` catches the whole voxel
/// staircase of a hole wall (its faces lie within `voxel_size / sqrt(2)` of the cylinder).
#[derive(Clone, Debug, PartialEq)]
pub struct BracketGeometry {
    /// Plate: the box `[plate_min, plate_max]`.
    pub plate_min: Point,
    pub plate_max: Point,
    /// Bolt hole axes `(x, y)`; the holes run along z through the plate.
    pub bolt_hole_centres: [[f64; 2]; 4],
    pub bolt_hole_radius: f64,
    /// Rib: the box `[rib_min, rib_max]`, standing on the plate.
    pub rib_min: Point,
    pub rib_max: Point,
    /// A point on the load hole's axis (on the rib's mid-plane); the hole runs along y
    /// through the rib.
    pub load_hole_centre: Point,
    pub load_hole_radius: f64,
    /// Edge length of the cubic voxels.
    pub voxel_size: f64,
    /// Voxels per axis; voxel `(i, j, k)` spans `origin + [i, i+1] * voxel_size` etc.
    pub grid: [usize; 3],
    pub origin: Point,
}

/// Smallest and largest accepted [`bracket`] resolution.
pub const BRACKET_RESOLUTION: std::ops::RangeInclusive<usize> = 12..=1000;

/// The bracket's geometry at a resolution (voxels along its longest side, x); see
/// [`bracket`]. Dimensions: plate 120 x 80 x 16, bolt holes of radius 6 at 15 mm from the
/// plate's sides, rib 80 x 16 x 60 on the plate's centre line, load hole of radius 12 at
/// height 52.
pub fn bracket_geometry(resolution: usize) -> BracketGeometry {
    let (lx, ly, lz) = (120.0, 80.0, 76.0);
    let r = resolution.max(1);
    let h = lx / r as f64;
    let cells = |l: f64| ((l / h) - 1e-9).ceil().max(1.0) as usize;
    BracketGeometry {
        plate_min: [0.0, 0.0, 0.0],
        plate_max: [lx, ly, 16.0],
        bolt_hole_centres: [[15.0, 15.0], [105.0, 15.0], [15.0, 65.0], [105.0, 65.0]],
        bolt_hole_radius: 6.0,
        rib_min: [20.0, 32.0, 16.0],
        rib_max: [100.0, 48.0, lz],
        load_hole_centre: [60.0, 40.0, 52.0],
        load_hole_radius: 12.0,
        voxel_size: h,
        grid: [r, cells(ly), cells(lz)],
        origin: [0.0; 3],
    }
}

impl BracketGeometry {
    fn in_box(p: Point, lo: Point, hi: Point) -> bool {
        (0..3).all(|d| p[d] >= lo[d] && p[d] <= hi[d])
    }

    /// Whether `p` is inside the solid (plate or rib, minus the holes).
    pub fn contains(&self, p: Point) -> bool {
        let r2 = self.bolt_hole_radius * self.bolt_hole_radius;
        let in_plate = Self::in_box(p, self.plate_min, self.plate_max)
            && !self
                .bolt_hole_centres
                .iter()
                .any(|c| (p[0] - c[0]).powi(2) + (p[1] - c[1]).powi(2) < r2);
        let c = self.load_hole_centre;
        let in_rib = Self::in_box(p, self.rib_min, self.rib_max)
            && (p[0] - c[0]).powi(2) + (p[2] - c[2]).powi(2)
                >= self.load_hole_radius * self.load_hole_radius;
        in_plate || in_rib
    }

    /// The bolt hole whose wall `p` lies on, within `tol` of the cylinder and inside the
    /// plate's height.
    pub fn bolt_hole_at(&self, p: Point, tol: f64) -> Option<usize> {
        if p[2] < self.plate_min[2] - tol || p[2] > self.plate_max[2] + tol {
            return None;
        }
        self.bolt_hole_centres.iter().position(|c| {
            let d = ((p[0] - c[0]).powi(2) + (p[1] - c[1]).powi(2)).sqrt();
            (d - self.bolt_hole_radius).abs() <= tol
        })
    }

    /// Whether `p` lies on the load hole's wall, within `tol` of the cylinder and inside
    /// the rib's thickness.
    pub fn on_load_hole(&self, p: Point, tol: f64) -> bool {
        let c = self.load_hole_centre;
        let d = ((p[0] - c[0]).powi(2) + (p[2] - c[2]).powi(2)).sqrt();
        p[1] >= self.rib_min[1] - tol
            && p[1] <= self.rib_max[1] + tol
            && (d - self.load_hole_radius).abs() <= tol
    }

    /// Whether voxel `v` belongs to the solid (its centre is inside).
    pub fn keeps_voxel(&self, v: [usize; 3]) -> bool {
        let h = self.voxel_size;
        self.contains(std::array::from_fn(|d| {
            self.origin[d] + (v[d] as f64 + 0.5) * h
        }))
    }
}

/// A mechanical bracket (plate with four bolt holes, upright rib with a load hole; see
/// [`BracketGeometry`]), voxelized on a grid with `resolution` voxels along its longest side
/// (x, 120 mm) and cubic voxels, each voxel whose centre lies in the solid split into six
/// Kuhn tetrahedra (conforming across neighbours).
///
/// Size: `6 * (voxels inside)`, about `0.75 * resolution^3` tetrahedra for resolution >= 24
/// (the solid fills about 216,000 mm³; a voxel is `(120 / resolution)^3` mm³; coarser grids
/// overshoot the holes' volume) and 0.13-0.19 `resolution^3` vertices. Measured:
///
/// | resolution | vertices | tetrahedra |
/// |---:|---:|---:|
/// | 12 | 510 | 1,632 |
/// | 24 | 2,664 | 10,848 |
/// | 50 | 20,048 | 98,364 |
/// | 110 | 187,232 | 1,020,240 |
/// | 232 | 1,638,464 | 9,378,120 |
///
/// Generation runs on rayon (voxel slabs, then the builder's parallel sorts); 1M
/// tetrahedra take about 1.3 s of CPU time in release builds, 9.4M about 11 s and 3.2 GB.
/// Peak bytes of generating a voxel mesh of `voxels` voxels split as `kind` (the cells,
/// the polyhedral mesh's operators and the relations built with it; measured peaks, rounded
/// up: ~900 bytes per tetrahedron, six per voxel).
pub fn voxel_mesh_bytes(voxels: u64, kind: BoxKind) -> u64 {
    let per_voxel: u64 = match kind {
        BoxKind::Tet => 6 * 900,
        BoxKind::Hex => 1200,
        BoxKind::Mixed => 6 * 900,
    };
    voxels.saturating_mul(per_voxel)
}

/// Kept voxels of the bracket at `resolution`, estimated from its solid volume (plate and rib
/// less the holes) over the voxel volume, plus 25 % for the voxels the surfaces cut.
pub fn bracket_voxels(resolution: usize) -> u64 {
    let g = bracket_geometry(resolution);
    let h = g.voxel_size;
    let pi = std::f64::consts::PI;
    let d = |lo: Point, hi: Point, k: usize| hi[k] - lo[k];
    let plate_h = d(g.plate_min, g.plate_max, 2);
    let plate = d(g.plate_min, g.plate_max, 0) * d(g.plate_min, g.plate_max, 1) * plate_h
        - 4.0 * pi * g.bolt_hole_radius.powi(2) * plate_h;
    let rib_w = d(g.rib_min, g.rib_max, 1);
    let rib = d(g.rib_min, g.rib_max, 0) * rib_w * d(g.rib_min, g.rib_max, 2)
        - pi * g.load_hole_radius.powi(2) * rib_w;
    ((plate + rib) / (h * h * h) * 1.25).ceil().max(1.0) as u64
}

/// Refuse generating a mesh of `voxels` voxels that would not fit in the memory budget.
pub fn check_voxels(what: &str, voxels: u64, kind: BoxKind) -> Result<(), MeshError> {
    Ok(tessera_core::memory::check(
        format!("generating {what} ({voxels} voxels)"),
        voxel_mesh_bytes(voxels, kind),
    )?)
}

/// Resolutions outside [`BRACKET_RESOLUTION`] are an error (below 12 the bolt holes vanish).
pub fn bracket(resolution: usize) -> Result<PolyMesh, MeshError> {
    if !BRACKET_RESOLUTION.contains(&resolution) {
        return Err(MeshError::Unsupported(format!(
            "bracket resolution {resolution} is outside {}..={}",
            BRACKET_RESOLUTION.start(),
            BRACKET_RESOLUTION.end()
        )));
    }
    let g = bracket_geometry(resolution);
    let h = g.voxel_size;
    voxel_mesh(BoxKind::Tet, g.grid, g.origin, [h; 3], |v| g.keeps_voxel(v))
}

/// A small non-manifold mesh (dissertation §3.3: "storage of non-manifold meshes is possible
/// as well"): two unit hexahedra `[0,1]^3` and `[1,2] x [1,2] x [0,1]` that share only the
/// edge `x = y = 1`, plus a free quad face (belonging to no cell) standing on the first
/// hexahedron's top edge at `y = 0`. 16 vertices, 26 edges, 13 faces, 2 cells; Euler
/// characteristic 16 - 26 + 13 - 2 = 1 (two balls glued along an edge, plus a disc glued
/// along an edge: 1 + 1 - 1 + 1 - 1). Its boundary has 14 half-faces (both sides of the free
/// face) and it is not manifold.
pub fn non_manifold_example() -> PolyMesh {
    let mut p: Vec<Point> = Vec::new();
    for (ox, oy) in [(0.0, 0.0), (1.0, 1.0)] {
        for d in 0..8usize {
            p.push([
                ox + (d & 1) as f64,
                oy + ((d >> 1) & 1) as f64,
                ((d >> 2) & 1) as f64,
            ]);
        }
    }
    // the second hex's corner (0,0,dz) is the first hex's corner (1,1,dz): reuse 3 and 7
    let mut remap: Vec<u32> = (0..8).collect();
    let mut positions: Vec<Point> = p[..8].to_vec();
    for d in 0..8usize {
        if d & 3 == 0 {
            remap.push(if d == 0 { 3 } else { 7 });
        } else {
            remap.push(positions.len() as u32);
            positions.push(p[8 + d]);
        }
    }
    // fin: (0,0,1) (1,0,1) (1,0,2) (0,0,2)
    let f0 = positions.len() as u32;
    positions.push([1.0, 0.0, 2.0]);
    positions.push([0.0, 0.0, 2.0]);
    let mut b = PolyMeshBuilder::new(positions);
    for h in 0..2 {
        let v: Vec<u32> = HEX.iter().map(|&d| remap[8 * h + d]).collect();
        b.add_typed_cell(CellType::Hexahedron, &v)
            .expect("valid hexahedron");
    }
    b.add_free_face(&[4, 5, f0, f0 + 1])
        .expect("valid free face");
    b.build(Par::Seq).expect("valid example mesh")
}
