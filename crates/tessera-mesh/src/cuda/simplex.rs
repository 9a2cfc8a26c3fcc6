//! Simplex-mesh derivation on the GPU (dissertation §3.4.4): edges and faces by sort +
//! unique of sorted vertex tuples (radix sort of keys packed in as few bits as the vertex
//! count needs, [`Primitives::unique_with_ids`], then widened to the stored layout),
//! the cell operators with implicit offsets by scattering the unique ids back to the cell
//! slots (no binary search), facet orientation by Eq. 3.14, and ∂2 of the faces.
//! Results equal [`SimplexMesh::edges`], [`SimplexMesh::faces`],
//! [`SimplexMesh::cell_edges_array`], [`SimplexMesh::cell_faces_array`],
//! [`SimplexMesh::cell_facets`] and [`SimplexMesh::face_edges`] exactly.

use crate::simplex::SimplexMesh;
use crate::MeshError;
use tessera_gpu::{CompileOptions, DeviceBuffer, Gpu, LaunchConfig, Primitives};

/// CUDA source of the simplex kernels (deterministic: a constant).
pub const SOURCE: &str = include_str!("kernels/simplex.cu");
/// Faces are packed as three 21-bit vertex indices.
pub const FACE_BITS: u32 = 21;

/// The derived topology of a simplex mesh, in device memory.
pub struct DeviceSimplex {
    /// 2 (triangles) or 3 (tetrahedra).
    pub dim: usize,
    /// Sorted unique edges, packed `a << 32 | b` with `a < b`.
    pub edges: DeviceBuffer<u64>,
    /// Sorted unique faces (d = 3), packed `a << 42 | b << 21 | c` with `a < b < c`.
    pub faces: DeviceBuffer<u64>,
    /// `C(d+1, 2)` edge ids per cell in combination order.
    pub cell_edges: DeviceBuffer<u32>,
    /// 4 face ids per tetrahedron in combination order (empty for d = 2).
    pub cell_faces: DeviceBuffer<u32>,
    /// `d + 1` TCSR-encoded facets per cell (Eq. 3.14).
    pub cell_facets: DeviceBuffer<i32>,
    /// 3 encoded edges per face (d = 3).
    pub face_edges: DeviceBuffer<i32>,
}

fn bits_for(n: usize) -> u32 {
    if n <= 1 {
        1
    } else {
        64 - ((n - 1) as u64).leading_zeros()
    }
}

/// Sort `keys` (with slots) on `bits` bits, unique them, widen the unique keys from `b` bits
/// per vertex to the stored layout (`what`: 0 edges, 1 faces), and scatter the unique ids back
/// to the slots. Returns (unique keys, id per slot).
#[allow(clippy::too_many_arguments)]
fn sort_unique_scatter(
    gpu: &Gpu,
    prims: &Primitives<'_>,
    scatter: &tessera_gpu::Kernel,
    widen: &tessera_gpu::Kernel,
    mut keys: DeviceBuffer<u64>,
    mut slots: DeviceBuffer<u32>,
    b: u32,
    what: u32,
) -> Result<(DeviceBuffer<u64>, DeviceBuffer<u32>), MeshError> {
    let n = keys.len();
    let bits = if what == 0 { 2 * b } else { 3 * b };
    prims.radix_sort(&mut keys, Some(&mut slots), Some(bits))?;
    let (uniq, ids) = prims.unique_with_ids(&keys)?;
    let nu = uniq.len() as u64;
    gpu.launch(widen, LaunchConfig::for_items(uniq.len(), 256)?)
        .arg(&uniq)
        .arg(&nu)
        .arg(&b)
        .arg(&what)
        .run()?;
    let per_slot = gpu.alloc::<u32>(n)?;
    let nn = n as u64;
    gpu.launch(scatter, LaunchConfig::for_items(n, 256)?)
        .arg(&slots)
        .arg(&ids)
        .arg(&nn)
        .arg(&per_slot)
        .run()?;
    Ok((uniq, per_slot))
}

/// Derive edges, faces and the cell operators of `mesh` on the GPU (uploads `cellVertices`).
pub fn derive(gpu: &Gpu, mesh: &SimplexMesh) -> Result<DeviceSimplex, MeshError> {
    let cv = gpu.upload(mesh.cell_vertices())?;
    derive_device(gpu, &cv, mesh.dim(), mesh.num_vertices())
}

/// Derive from `cellVertices` already on the device (`(dim + 1)` vertices per cell, valid
/// indices below `nv`, as checked by [`SimplexMesh::new`]).
pub fn derive_device(
    gpu: &Gpu,
    cv: &DeviceBuffer<u32>,
    dim: usize,
    nv: usize,
) -> Result<DeviceSimplex, MeshError> {
    if dim != 2 && dim != 3 {
        return Err(MeshError::Unsupported(format!(
            "simplex meshes of dimension {dim}"
        )));
    }
    let m = dim + 1;
    let nc = cv.len() / m;
    let ne_local = if dim == 3 { 6 } else { 3 };
    if nc * ne_local > u32::MAX as usize {
        return Err(MeshError::Unsupported(format!(
            "{nc} cells: more than 2^32 cell-edge slots"
        )));
    }
    if dim == 3 && nv > 1 << FACE_BITS {
        return Err(MeshError::Unsupported(format!(
            "GPU simplex derivation packs faces in 3 x {FACE_BITS} bits; {nv} vertices exceed 2^{FACE_BITS}"
        )));
    }
    let module = gpu.compile(SOURCE, &CompileOptions::named("tessera_simplex.cu"))?;
    let prims = gpu.primitives()?;
    let scatter = module.function("scatter_ids")?;
    let widen = module.function("simplex_widen_keys")?;
    // keys hold b bits per vertex (radix passes: 2b / 8 for edges, 3b / 8 for faces)
    let b = bits_for(nv);
    let ncu = nc as u64;
    let d32 = dim as u32;
    let cfg = LaunchConfig::for_items(nc, 256)?;
    // edges
    let keys = gpu.alloc::<u64>(nc * ne_local)?;
    let slots = gpu.alloc::<u32>(nc * ne_local)?;
    gpu.launch(&module.function("simplex_edge_keys")?, cfg)
        .arg(cv)
        .arg(&ncu)
        .arg(&d32)
        .arg(&b)
        .arg(&keys)
        .arg(&slots)
        .run()?;
    let (edges, cell_edges) =
        sort_unique_scatter(gpu, &prims, &scatter, &widen, keys, slots, b, 0)?;
    // faces (d = 3)
    let (faces, cell_faces) = if dim == 3 {
        let keys = gpu.alloc::<u64>(nc * 4)?;
        let slots = gpu.alloc::<u32>(nc * 4)?;
        gpu.launch(&module.function("simplex_face_keys")?, cfg)
            .arg(cv)
            .arg(&ncu)
            .arg(&b)
            .arg(&keys)
            .arg(&slots)
            .run()?;
        sort_unique_scatter(gpu, &prims, &scatter, &widen, keys, slots, b, 1)?
    } else {
        (gpu.alloc::<u64>(0)?, gpu.alloc::<u32>(0)?)
    };
    // facets with orientation
    let cell_facets = gpu.alloc::<i32>(nc * m)?;
    let facet_ids = if dim == 3 { &cell_faces } else { &cell_edges };
    gpu.launch(&module.function("simplex_facets")?, cfg)
        .arg(cv)
        .arg(facet_ids)
        .arg(&ncu)
        .arg(&d32)
        .arg(&cell_facets)
        .run()?;
    // ∂2 of the faces
    let face_edges = gpu.alloc::<i32>(3 * faces.len())?;
    if dim == 3 {
        let (nf, ne) = (faces.len() as u64, edges.len() as u64);
        gpu.launch(
            &module.function("simplex_face_edges")?,
            LaunchConfig::for_items(faces.len(), 256)?,
        )
        .arg(&faces)
        .arg(&nf)
        .arg(&edges)
        .arg(&ne)
        .arg(&face_edges)
        .run()?;
    }
    Ok(DeviceSimplex {
        dim,
        edges,
        faces,
        cell_edges,
        cell_faces,
        cell_facets,
        face_edges,
    })
}

impl DeviceSimplex {
    /// Edges as `[a, b]` pairs.
    pub fn download_edges(&self, gpu: &Gpu) -> Result<Vec<[u32; 2]>, MeshError> {
        Ok(gpu
            .download(&self.edges)?
            .into_iter()
            .map(|k| [(k >> 32) as u32, k as u32])
            .collect())
    }
    /// Faces as sorted `[a, b, c]` triples.
    pub fn download_faces(&self, gpu: &Gpu) -> Result<Vec<[u32; 3]>, MeshError> {
        let mask = (1u64 << FACE_BITS) - 1;
        Ok(gpu
            .download(&self.faces)?
            .into_iter()
            .map(|k| {
                [
                    (k >> (2 * FACE_BITS)) as u32,
                    ((k >> FACE_BITS) & mask) as u32,
                    (k & mask) as u32,
                ]
            })
            .collect())
    }
}
