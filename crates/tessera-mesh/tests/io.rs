//! File format tests: readers against hand-written fixtures and independent encoders,
//! round trips (read -> write -> read gives identical ∂1, ∂2, ∂3), an independent VTU
//! reader, the malformed-file corpus, and the shared benchmark meshes when present.

use std::path::{Path, PathBuf};
use tessera_core::Par;
use tessera_mesh::generate::{box_mesh, BoxKind};
use tessera_mesh::io::{
    read_mesh, typed_cell_vertices, write_mesh, write_obj, write_vtu, write_vtu_with, DataArray,
    MeshFile, VtuEncoding,
};
use tessera_mesh::{CellType, MeshError, PolyMesh, PolyMeshBuilder};
use tessera_sparse::tcsr::{col, decode};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn read(p: &Path) -> MeshFile {
    read_mesh(p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display()))
}

/// Identical topology: ∂1, ∂2, ∂3 compared exactly; positions within `rel` relative.
fn assert_same(a: &PolyMesh, b: &PolyMesh, rel: f64) {
    assert_eq!(a.num_vertices(), b.num_vertices(), "vertex count");
    assert_eq!(a.edge_vertices(), b.edge_vertices(), "∂1");
    assert_eq!(a.face_edges(), b.face_edges(), "∂2");
    assert_eq!(a.cell_faces(), b.cell_faces(), "∂3");
    let scale = a
        .positions()
        .iter()
        .flatten()
        .fold(0f64, |m, x| m.max(x.abs()))
        .max(1e-300);
    for (p, q) in a.positions().iter().zip(b.positions()) {
        for d in 0..3 {
            assert!(
                (p[d] - q[d]).abs() <= rel * scale,
                "position {p:?} vs {q:?}"
            );
        }
    }
}

/// Same ∂1, ∂2 and positions, and ∂3 equal after sorting each row (cells whose source
/// vertex order was inverted are written positively, which reorders their faces).
fn assert_same_up_to_row_order(a: &PolyMesh, b: &PolyMesh) {
    assert_eq!(a.edge_vertices(), b.edge_vertices(), "∂1");
    assert_eq!(a.face_edges(), b.face_edges(), "∂2");
    assert_eq!(a.positions(), b.positions());
    assert_eq!(a.num_cells(), b.num_cells());
    for c in 0..a.num_cells() {
        let mut x = a.cell_faces().row(c).to_vec();
        let mut y = b.cell_faces().row(c).to_vec();
        x.sort_unstable();
        y.sort_unstable();
        assert_eq!(x, y, "cell {c}");
    }
}

fn counts(m: &PolyMesh) -> (usize, usize, usize, usize) {
    (
        m.num_vertices(),
        m.num_edges(),
        m.num_faces(),
        m.num_cells(),
    )
}

fn cell_types(m: &PolyMesh) -> Vec<Option<CellType>> {
    let mut buf = [0u32; 8];
    (0..m.num_cells())
        .map(|c| typed_cell_vertices(m, c, &mut buf))
        .collect()
}

/// Sorted vertex set of face `f`.
fn face_set(m: &PolyMesh, f: usize) -> Vec<u32> {
    let mut v: Vec<u32> = m.face_vertices().row(f).iter().map(|&x| col(x)).collect();
    v.sort_unstable();
    v
}

/// Signed volume of every cell from its outward face loops (independent of the crate's).
fn cell_volumes(m: &PolyMesh) -> Vec<f64> {
    let pos = m.positions();
    (0..m.num_cells())
        .map(|c| {
            let mut vol = 0.0;
            for &e in m.cell_faces().row(c) {
                let (f, s) = decode(e);
                let mut l: Vec<usize> = m
                    .face_vertices()
                    .row(f as usize)
                    .iter()
                    .map(|&x| col(x) as usize)
                    .collect();
                if s < 0 {
                    l.reverse();
                }
                let a = pos[l[0]];
                for k in 1..l.len() - 1 {
                    let (b, c) = (pos[l[k]], pos[l[k + 1]]);
                    vol += a[0] * (b[1] * c[2] - b[2] * c[1]) - a[1] * (b[0] * c[2] - b[2] * c[0])
                        + a[2] * (b[0] * c[1] - b[1] * c[0]);
                }
            }
            vol / 6.0
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// readers

#[test]
fn msh41_mixed_fixture() {
    let f = read(&fixture("mixed-v41.msh"));
    let m = &f.mesh;
    // node 500 is used by no element and dropped
    assert_eq!(counts(m), (12, 24, 17, 4));
    assert_eq!(m.euler_characteristic(), 1);
    use CellType::*;
    assert_eq!(
        cell_types(m),
        vec![
            Some(Hexahedron),
            Some(Pyramid),
            Some(Prism),
            Some(Tetrahedron)
        ]
    );
    // every cell outward
    assert!(cell_volumes(m).iter().all(|&v| v > 0.0));
    let vols = cell_volumes(m);
    assert!(
        (vols[0] - 1.0).abs() < 1e-12
            && (vols[1] - 0.5 / 3.0).abs() < 1e-12
            && (vols[2] - 0.5).abs() < 1e-12
    );
    m.validate().expect("valid mesh");
    let names: Vec<(u8, i32, &str)> = f
        .groups
        .iter()
        .map(|g| (g.dim, g.tag, g.name.as_str()))
        .collect();
    assert_eq!(
        names,
        vec![
            (1, 4, "edge"),
            (2, 2, "bottom"),
            (2, 3, "tip"),
            (3, 1, "solid")
        ]
    );
    assert_eq!(f.group("solid").unwrap().entities, vec![0, 1, 2, 3]);
    let bottom = &f.group("bottom").unwrap().entities;
    assert_eq!(bottom.len(), 1);
    assert_eq!(face_set(m, bottom[0] as usize), vec![0, 1, 2, 3]);
    let tip = &f.group("tip").unwrap().entities;
    assert_eq!(face_set(m, tip[0] as usize), vec![5, 9, 11]);
    let edge = &f.group("edge").unwrap().entities;
    assert_eq!(m.edge_vertices()[edge[0] as usize], [9, 10]);
}

#[test]
fn msh22_and_medit_match_msh41() {
    let a = read(&fixture("mixed-v41.msh"));
    let b = read(&fixture("mixed-v22.msh"));
    assert_same(&a.mesh, &b.mesh, 0.0);
    assert_eq!(a.groups, b.groups);
    let c = read(&fixture("mixed.mesh"));
    assert_same(&a.mesh, &c.mesh, 0.0);
    // Medit references: the boundary groups resolve to the same entities
    for (dim, tag) in [(2u8, 2), (2, 3), (1, 4)] {
        let ga = a
            .groups
            .iter()
            .find(|g| (g.dim, g.tag) == (dim, tag))
            .unwrap();
        let gc = c
            .groups
            .iter()
            .find(|g| (g.dim, g.tag) == (dim, tag))
            .unwrap();
        assert_eq!(ga.entities, gc.entities);
    }
}

/// The mixed fixture as data, for the independent binary encoders below.
struct Mixed {
    nodes: Vec<(u64, [f64; 3])>,
    /// (tag, gmsh type, entity dim, entity tag, physical tag, node tags)
    elements: Vec<(u64, i32, i32, i32, i32, Vec<u64>)>,
}

fn mixed_data() -> Mixed {
    let xyz: [[f64; 3]; 13] = [
        [0., 0., 0.],
        [1., 0., 0.],
        [1., 1., 0.],
        [0., 1., 0.],
        [0., 0., 1.],
        [1., 0., 1.],
        [1., 1., 1.],
        [0., 1., 1.],
        [0.5, 0.5, 1.5],
        [2., 0., 0.],
        [2., 1., 0.],
        [1.3, -1., 0.3],
        [9., 9., 9.],
    ];
    let tags: Vec<u64> = (1..=12).map(|i| 10 * i).chain([500]).collect();
    Mixed {
        nodes: tags.into_iter().zip(xyz).collect(),
        elements: vec![
            (1, 5, 3, 1, 1, vec![10, 20, 30, 40, 50, 60, 70, 80]),
            (2, 7, 3, 1, 1, vec![50, 60, 70, 80, 90]),
            (3, 6, 3, 1, 1, vec![20, 60, 100, 30, 70, 110]),
            (4, 4, 3, 1, 1, vec![20, 100, 60, 120]),
            (5, 3, 2, 1, 2, vec![10, 20, 30, 40]),
            (6, 2, 2, 2, 3, vec![100, 60, 120]),
            (7, 1, 1, 1, 4, vec![100, 110]),
        ],
    }
}

const NAMES: &str = "$PhysicalNames\n4\n1 4 \"edge\"\n2 2 \"bottom\"\n2 3 \"tip\"\n3 1 \"solid\"\n$EndPhysicalNames\n";

fn msh22_binary(d: &Mixed) -> Vec<u8> {
    let mut b = b"$MeshFormat\n2.2 1 8\n".to_vec();
    b.extend(1i32.to_le_bytes());
    b.extend(b"\n$EndMeshFormat\n");
    b.extend(NAMES.as_bytes());
    b.extend(format!("$Nodes\n{}\n", d.nodes.len()).as_bytes());
    for (t, p) in &d.nodes {
        b.extend((*t as i32).to_le_bytes());
        for x in p {
            b.extend(x.to_le_bytes());
        }
    }
    b.extend(format!("\n$EndNodes\n$Elements\n{}\n", d.elements.len()).as_bytes());
    for (tag, ty, _edim, etag, phys, nodes) in &d.elements {
        for v in [*ty, 1, 2, *tag as i32, *phys, *etag] {
            b.extend(v.to_le_bytes());
        }
        for n in nodes {
            b.extend((*n as i32).to_le_bytes());
        }
    }
    b.extend(b"\n$EndElements\n");
    b
}

fn msh41_binary(d: &Mixed) -> Vec<u8> {
    let mut b = b"$MeshFormat\n4.1 1 8\n".to_vec();
    b.extend(1i32.to_le_bytes());
    b.extend(b"\n$EndMeshFormat\n");
    b.extend(NAMES.as_bytes());
    b.extend(b"$Entities\n");
    for n in [0u64, 1, 2, 1] {
        b.extend(n.to_le_bytes());
    }
    // (tag, phys) of curve 1, surfaces 1 and 2, volume 1
    for (tag, phys) in [(1i32, 4i32), (1, 2), (2, 3), (1, 1)] {
        b.extend(tag.to_le_bytes());
        for x in [0.0f64, 0.0, 0.0, 1.0, 1.0, 1.0] {
            b.extend(x.to_le_bytes());
        }
        b.extend(1u64.to_le_bytes());
        b.extend(phys.to_le_bytes());
        b.extend(0u64.to_le_bytes());
    }
    b.extend(b"\n$EndEntities\n$Nodes\n");
    // three blocks: 8 + 4 volume nodes, then the unused point
    let blocks: [(i32, i32, std::ops::Range<usize>); 3] =
        [(3, 1, 0..8), (3, 1, 8..12), (0, 7, 12..13)];
    for n in [3u64, 13, 10, 500] {
        b.extend(n.to_le_bytes());
    }
    for (dim, tag, r) in blocks {
        b.extend(dim.to_le_bytes());
        b.extend(tag.to_le_bytes());
        b.extend(0i32.to_le_bytes());
        b.extend((r.len() as u64).to_le_bytes());
        for i in r.clone() {
            b.extend(d.nodes[i].0.to_le_bytes());
        }
        for i in r {
            for x in d.nodes[i].1 {
                b.extend(x.to_le_bytes());
            }
        }
    }
    b.extend(b"\n$EndNodes\n$Elements\n");
    for n in [7u64, 7, 1, 7] {
        b.extend(n.to_le_bytes());
    }
    for (tag, ty, edim, etag, _phys, nodes) in &d.elements {
        for v in [*edim, *etag, *ty] {
            b.extend(v.to_le_bytes());
        }
        b.extend(1u64.to_le_bytes());
        b.extend(tag.to_le_bytes());
        for n in nodes {
            b.extend(n.to_le_bytes());
        }
    }
    b.extend(b"\n$EndElements\n");
    b
}

#[test]
fn msh_binary_matches_ascii() {
    let dir = tempfile::tempdir().unwrap();
    let ascii = read(&fixture("mixed-v41.msh"));
    let d = mixed_data();
    for (name, bytes) in [("b22.msh", msh22_binary(&d)), ("b41.msh", msh41_binary(&d))] {
        let p = dir.path().join(name);
        std::fs::write(&p, &bytes).unwrap();
        let f = read(&p);
        assert_same(&ascii.mesh, &f.mesh, 0.0);
        assert_eq!(ascii.groups, f.groups, "{name}");
        // truncated binary: an error with a byte offset, never a panic
        for cut in [bytes.len() / 3, bytes.len() / 2, bytes.len() - 20] {
            let q = dir.path().join(format!("cut-{cut}-{name}"));
            std::fs::write(&q, &bytes[..cut]).unwrap();
            let e = read_mesh(&q).unwrap_err().to_string();
            assert!(
                e.contains(&format!("cut-{cut}-{name}")) && e.contains("byte "),
                "{e}"
            );
        }
    }
}

#[test]
fn tetgen_and_ovm_cube_agree() {
    let t = read(&fixture("cube.node"));
    let t2 = read(&fixture("cube.ele"));
    assert_same(&t.mesh, &t2.mesh, 0.0);
    assert_eq!(counts(&t.mesh), (8, 19, 18, 6));
    // region attributes 7 and 8
    assert_eq!(
        t.groups
            .iter()
            .map(|g| (g.dim, g.tag, g.entities.clone()))
            .collect::<Vec<_>>(),
        vec![(3, 7, vec![0, 1, 2]), (3, 8, vec![3, 4, 5])]
    );
    let o = read(&fixture("cube.ovm"));
    assert_eq!(counts(&o.mesh), (8, 19, 18, 6));
    o.mesh.validate().expect("valid");
    // meshio-style half-faces (normals into the cell) come out outward
    let vols = cell_volumes(&o.mesh);
    assert!(
        vols.iter().all(|&v| (v - 1.0 / 6.0).abs() < 1e-12),
        "{vols:?}"
    );
    // same cells as TetGen's (as vertex sets)
    let cv = |m: &PolyMesh| -> Vec<Vec<u32>> {
        let mut s: Vec<Vec<u32>> = (0..m.num_cells())
            .map(|c| m.cell_vertices().row(c).iter().map(|&v| col(v)).collect())
            .collect();
        s.sort();
        s
    };
    assert_eq!(cv(&t.mesh), cv(&o.mesh));
}

// ---------------------------------------------------------------------------------------
// round trips

fn round_trip(m1: &PolyMesh, dir: &Path, name: &str) {
    let p = dir.join(name);
    write_mesh(m1, &p).unwrap_or_else(|e| panic!("writing {name}: {e}"));
    let m2 = read(&p).mesh;
    assert_same(m1, &m2, 1e-12);
    // and once more: stable
    write_mesh(&m2, &p).unwrap();
    assert_same(&m2, &read(&p).mesh, 0.0);
}

#[test]
fn every_format_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mixed = read(&fixture("mixed-v41.msh")).mesh;
    for name in [
        "a.msh",
        "a.msh.gz",
        "a.mesh",
        "a.ovm",
        "a.ovm.gz",
        "a.mesh.gz",
    ] {
        round_trip(&mixed, d, name);
    }
    let medit = read(&fixture("mixed.mesh")).mesh;
    round_trip(&medit, d, "b.mesh");
    let cube = read(&fixture("cube.ele")).mesh;
    for name in ["c.node", "c.ele.gz", "c.msh", "c.ovm", "c.mesh"] {
        round_trip(&cube, d, name);
    }
    let ovm = read(&fixture("cube.ovm")).mesh;
    round_trip(&ovm, d, "d.ovm");
    // generated meshes (H1's generators): every type, with and without the builder's order
    for kind in [BoxKind::Tet, BoxKind::Hex, BoxKind::Mixed] {
        let g = box_mesh(kind, [3, 2, 2], [1.0, 2.0, 0.5]);
        let p = d.join("g.msh");
        write_mesh(&g, &p).unwrap();
        let m1 = read(&p).mesh;
        assert_same_up_to_row_order(&g, &m1);
        // Medit groups cells by type, so it keeps the order only of meshes with one type per run
        let names: &[&str] = if kind == BoxKind::Mixed {
            &["g2.msh", "g.ovm"]
        } else {
            &["g2.msh", "g.mesh", "g.ovm"]
        };
        for name in names {
            round_trip(&m1, d, name);
        }
        round_trip(&g, d, "g.ovm");
    }
}

#[test]
fn inverted_cells_are_written_positive_and_then_stable() {
    let dir = tempfile::tempdir().unwrap();
    // one tet given inverted (Gmsh/VTK order with negative volume)
    let pos = vec![
        [0.0, 0.0, 0.0],
        [1.0, 0.0, 0.0],
        [0.0, 1.0, 0.0],
        [0.0, 0.0, 1.0],
    ];
    let mut b = PolyMeshBuilder::new(pos);
    b.add_typed_cell(CellType::Tetrahedron, &[0, 2, 1, 3])
        .unwrap();
    let m = b.build(Par::Seq).unwrap();
    let p = dir.path().join("inv.msh");
    write_mesh(&m, &p).unwrap();
    let text = std::fs::read_to_string(&p).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let at = lines
        .iter()
        .position(|l| *l == "3 1 4 1")
        .expect("one tet block");
    let t: Vec<usize> = lines[at + 1]
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse::<usize>().unwrap() - 1)
        .collect();
    let p0 = m.positions();
    let d = |i: usize| {
        [
            p0[t[i]][0] - p0[t[0]][0],
            p0[t[i]][1] - p0[t[0]][1],
            p0[t[i]][2] - p0[t[0]][2],
        ]
    };
    let (a, b, c) = (d(1), d(2), d(3));
    let det = a[0] * (b[1] * c[2] - b[2] * c[1]) - a[1] * (b[0] * c[2] - b[2] * c[0])
        + a[2] * (b[0] * c[1] - b[1] * c[0]);
    assert!(det > 0.0, "positive Gmsh order written: {t:?}");
    let m2 = read(&p).mesh;
    round_trip(&m2, dir.path(), "inv2.msh");
}

#[test]
fn gzip_is_detected_by_magic_and_name() {
    let dir = tempfile::tempdir().unwrap();
    let mixed = read(&fixture("mixed-v41.msh")).mesh;
    let gz = dir.path().join("x.msh.gz");
    write_mesh(&mixed, &gz).unwrap();
    let raw = std::fs::read(&gz).unwrap();
    assert_eq!(&raw[..2], &[0x1f, 0x8b]);
    // same bytes under a plain name: detected by the magic
    let plain = dir.path().join("y.msh");
    std::fs::write(&plain, &raw).unwrap();
    assert_same(&mixed, &read(&plain).mesh, 0.0);
    // a .gz name without gzip data is a clear error
    let fake = dir.path().join("z.msh.gz");
    std::fs::copy(fixture("mixed-v41.msh"), &fake).unwrap();
    let e = read_mesh(&fake).unwrap_err().to_string();
    assert!(e.contains("z.msh.gz") && e.contains("gzip"), "{e}");
}

#[test]
fn writes_are_atomic_and_polyhedra_are_refused_by_msh() {
    let dir = tempfile::tempdir().unwrap();
    let poly = hex_prism_mesh();
    let p = dir.path().join("poly.msh");
    let e = write_mesh(&poly, &p).unwrap_err();
    assert!(matches!(e, MeshError::Unsupported(_)), "{e}");
    assert!(e.to_string().contains("polyhedron"), "{e}");
    assert!(!p.exists());
    let e = write_mesh(&poly, &dir.path().join("missing-dir/x.vtu")).unwrap_err();
    assert!(matches!(e, MeshError::Io { .. }), "{e}");
    // no temporary files are left behind
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

// ---------------------------------------------------------------------------------------
// VTU: an independent structural reader

/// A hexagonal prism (8 faces: a general polyhedron) glued to a tetrahedron.
fn hex_prism_mesh() -> PolyMesh {
    hex_prism(true)
}

fn hex_prism(with_tet: bool) -> PolyMesh {
    let mut pos = Vec::new();
    for z in [0.0, 1.0] {
        for k in 0..6 {
            let a = std::f64::consts::PI / 3.0 * k as f64;
            pos.push([a.cos(), a.sin(), z]);
        }
    }
    pos.push([2.0, 0.5, 0.5]);
    let bottom: Vec<u32> = (0..6).rev().collect();
    let top: Vec<u32> = (6..12).collect();
    let sides: Vec<Vec<u32>> = (0..6)
        .map(|k| vec![k, (k + 1) % 6, (k + 1) % 6 + 6, k + 6])
        .collect();
    let mut faces: Vec<&[u32]> = vec![&bottom, &top];
    faces.extend(sides.iter().map(|s| s.as_slice()));
    let mut b = PolyMeshBuilder::new(pos);
    b.add_cell(&faces).unwrap();
    if with_tet {
        b.add_typed_cell(CellType::Tetrahedron, &[0, 1, 7, 12])
            .unwrap();
    }
    b.build(Par::Seq).unwrap()
}

struct Vtu {
    npoints: usize,
    ncells: usize,
    /// (section, name, components, values as f64)
    arrays: Vec<(String, String, usize, Vec<f64>)>,
}

impl Vtu {
    fn get(&self, section: &str, name: &str) -> &(String, String, usize, Vec<f64>) {
        self.arrays
            .iter()
            .find(|a| a.0 == section && a.1 == name)
            .unwrap_or_else(|| panic!("no DataArray {name} in {section}"))
    }
    fn ints(&self, name: &str) -> Vec<i64> {
        self.get("Cells", name)
            .3
            .iter()
            .map(|&x| x as i64)
            .collect()
    }
}

fn attr(tag: &str, key: &str) -> Option<String> {
    let k = format!(" {key}=\"");
    let i = tag.find(&k)? + k.len();
    Some(tag[i..i + tag[i..].find('"')?].to_string())
}

fn b64decode(s: &str) -> Vec<u8> {
    let val = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => (c - b'A') as u32,
            b'a'..=b'z' => (c - b'a' + 26) as u32,
            b'0'..=b'9' => (c - b'0' + 52) as u32,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("bad base64 char {c}"),
        }
    };
    let clean: Vec<u8> = s.bytes().filter(|c| !c.is_ascii_whitespace()).collect();
    assert_eq!(clean.len() % 4, 0);
    let mut out = Vec::new();
    for q in clean.chunks(4) {
        let pad = q.iter().filter(|&&c| c == b'=').count();
        let n = q
            .iter()
            .take(4 - pad)
            .enumerate()
            .fold(0u32, |acc, (i, &c)| acc | (val(c) << (18 - 6 * i)));
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..3 - pad]);
    }
    out
}

/// Parse a .vtu written by Tessera without using the crate: XML by hand.
fn parse_vtu(text: &str) -> Vtu {
    assert!(text.starts_with("<?xml"));
    let head = &text[text.find("<VTKFile").unwrap()..];
    let head = &head[..head.find('>').unwrap()];
    assert_eq!(attr(head, "type").as_deref(), Some("UnstructuredGrid"));
    assert_eq!(attr(head, "byte_order").as_deref(), Some("LittleEndian"));
    assert_eq!(attr(head, "header_type").as_deref(), Some("UInt64"));
    let piece = &text[text.find("<Piece").unwrap()..];
    let piece = &piece[..piece.find('>').unwrap()];
    let npoints = attr(piece, "NumberOfPoints").unwrap().parse().unwrap();
    let ncells = attr(piece, "NumberOfCells").unwrap().parse().unwrap();
    let mut arrays = Vec::new();
    let mut rest = text;
    let mut offset = 0;
    while let Some(i) = rest.find("<DataArray") {
        let at = offset + i;
        let section = ["PointData", "CellData", "Points", "Cells"]
            .iter()
            .filter_map(|s| text[..at].rfind(&format!("<{s}")).map(|p| (p, *s)))
            .max()
            .unwrap()
            .1;
        let tag_end = rest[i..].find('>').unwrap() + i;
        let tag = &rest[i..tag_end];
        let body_end = rest[tag_end..].find("</DataArray>").unwrap() + tag_end;
        let body = &rest[tag_end + 1..body_end];
        let ty = attr(tag, "type").unwrap();
        let name = attr(tag, "Name").unwrap_or_default();
        let comps: usize = attr(tag, "NumberOfComponents")
            .map(|s| s.parse().unwrap())
            .unwrap_or(1);
        let values: Vec<f64> = match attr(tag, "format").unwrap().as_str() {
            "ascii" => body
                .split_whitespace()
                .map(|t| t.parse::<f64>().unwrap())
                .collect(),
            "binary" => {
                let raw = b64decode(body);
                let n = u64::from_le_bytes(raw[..8].try_into().unwrap()) as usize;
                let data = &raw[8..];
                assert_eq!(data.len(), n, "{name}: header length");
                match ty.as_str() {
                    "Float64" => data
                        .chunks(8)
                        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
                        .collect(),
                    "Int64" => data
                        .chunks(8)
                        .map(|c| i64::from_le_bytes(c.try_into().unwrap()) as f64)
                        .collect(),
                    "UInt8" => data.iter().map(|&c| c as f64).collect(),
                    t => panic!("type {t}"),
                }
            }
            f => panic!("format {f}"),
        };
        arrays.push((section.to_string(), name, comps, values));
        offset += body_end;
        rest = &text[offset..];
    }
    Vtu {
        npoints,
        ncells,
        arrays,
    }
}

/// Check a parsed VTU against a mesh and rebuild the mesh from it.
fn check_vtu(v: &Vtu, m: &PolyMesh) -> PolyMesh {
    assert_eq!(v.npoints, m.num_vertices());
    assert_eq!(v.ncells, m.num_cells());
    let pts = v.get("Points", "Points");
    assert_eq!(pts.2, 3);
    let pos: Vec<[f64; 3]> = pts.3.chunks(3).map(|c| [c[0], c[1], c[2]]).collect();
    let conn = v.ints("connectivity");
    let offs = v.ints("offsets");
    let types = v.ints("types");
    assert_eq!(offs.len(), m.num_cells());
    assert_eq!(types.len(), m.num_cells());
    assert_eq!(*offs.last().unwrap() as usize, conn.len());
    assert!(conn.iter().all(|&c| c >= 0 && (c as usize) < v.npoints));
    let has_poly = types.contains(&42);
    let (faces, faceoffs) = if has_poly {
        (v.ints("faces"), v.ints("faceoffsets"))
    } else {
        (vec![], vec![])
    };
    let mut b = PolyMeshBuilder::new(pos).orient_by_volume(false);
    let mut start = 0usize;
    let mut fstart = 0usize;
    let mut buf = [0u32; 8];
    for c in 0..m.num_cells() {
        let end = offs[c] as usize;
        assert!(end > start);
        let cv: Vec<u32> = conn[start..end].iter().map(|&x| x as u32).collect();
        let want = typed_cell_vertices(m, c, &mut buf);
        let gmsh = |ty: CellType, order: &[usize]| {
            assert_eq!(want, Some(ty), "cell {c}");
            assert_eq!(cv.len(), order.len());
            order.iter().map(|&i| cv[i]).collect::<Vec<u32>>()
        };
        match types[c] {
            10 => b
                .add_typed_cell(
                    CellType::Tetrahedron,
                    &gmsh(CellType::Tetrahedron, &[0, 1, 2, 3]),
                )
                .unwrap(),
            12 => b
                .add_typed_cell(
                    CellType::Hexahedron,
                    &gmsh(CellType::Hexahedron, &[0, 1, 2, 3, 4, 5, 6, 7]),
                )
                .unwrap(),
            13 => b
                .add_typed_cell(CellType::Prism, &gmsh(CellType::Prism, &[0, 1, 2, 3, 4, 5]))
                .unwrap(),
            14 => b
                .add_typed_cell(
                    CellType::Pyramid,
                    &gmsh(CellType::Pyramid, &[0, 1, 2, 3, 4]),
                )
                .unwrap(),
            42 => {
                assert_eq!(want, None);
                let fend = faceoffs[c] as usize;
                let stream = &faces[fstart..fend];
                let nf = stream[0] as usize;
                let mut loops: Vec<Vec<u32>> = Vec::new();
                let mut k = 1;
                for _ in 0..nf {
                    let n = stream[k] as usize;
                    loops.push(stream[k + 1..k + 1 + n].iter().map(|&x| x as u32).collect());
                    k += 1 + n;
                }
                assert_eq!(k, stream.len(), "face stream length of cell {c}");
                // connectivity = the cell's vertex set
                let mut set: Vec<u32> = loops.iter().flatten().copied().collect();
                set.sort_unstable();
                set.dedup();
                let mut cs = cv.clone();
                cs.sort_unstable();
                assert_eq!(set, cs);
                let refs: Vec<&[u32]> = loops.iter().map(|l| l.as_slice()).collect();
                b.add_cell(&refs).unwrap();
                fstart = fend;
            }
            t => panic!("unexpected VTK type {t}"),
        }
        if has_poly && types[c] != 42 {
            assert_eq!(faceoffs[c], -1);
        }
        start = end;
    }
    // outward loops: building without re-orientation must still give positive volumes
    b.build(Par::Seq).unwrap()
}

#[test]
fn vtu_passes_an_independent_structural_check() {
    let dir = tempfile::tempdir().unwrap();
    let meshes = vec![
        ("mixed", read(&fixture("mixed-v41.msh")).mesh),
        ("poly", hex_prism_mesh()),
        ("polyonly", hex_prism(false)),
        ("boxmix", {
            // normalise the generator's cell orders once through MSH (see every_format_round_trips)
            let p = dir.path().join("boxmix.msh");
            write_mesh(&box_mesh(BoxKind::Mixed, [2, 2, 2], [1.0, 1.0, 1.0]), &p).unwrap();
            read(&p).mesh
        }),
    ];
    for (name, m) in &meshes {
        let n = m.num_vertices();
        let temp: Vec<f64> = (0..n).map(|i| i as f64 * 0.25 - 1.0 / 3.0).collect();
        let disp: Vec<[f64; 3]> = (0..n).map(|i| [i as f64, -(i as f64), 1e-300]).collect();
        let cid: Vec<f64> = (0..m.num_cells()).map(|c| c as f64).collect();
        let data = [
            DataArray::point_scalars("temperature", temp.clone()),
            DataArray::point_vectors("displacement", &disp),
            DataArray::cell_scalars("cell id", cid.clone()),
        ];
        for enc in [VtuEncoding::Ascii, VtuEncoding::Base64] {
            let p = dir.path().join(format!("{name}-{enc:?}.vtu"));
            write_vtu_with(&p, m, &data, enc).unwrap();
            let v = parse_vtu(&std::fs::read_to_string(&p).unwrap());
            let back = check_vtu(&v, m);
            // typed cells and polyhedra rebuild to the identical topology; coordinates exact
            assert_same(m, &back, 0.0);
            assert_eq!(v.get("PointData", "temperature").3, temp);
            let d = v.get("PointData", "displacement");
            assert_eq!(d.2, 3);
            assert_eq!(d.3, disp.iter().flatten().copied().collect::<Vec<_>>());
            assert_eq!(v.get("CellData", "cell id").3, cid);
            meshio_check(&p, m);
        }
    }
    // wrong data length is an error, not a panic
    let m = &meshes[0].1;
    let e = write_vtu(
        &dir.path().join("bad.vtu"),
        m,
        &[DataArray::point_scalars("t", vec![1.0])],
    )
    .unwrap_err();
    assert!(e.to_string().contains("expected 12"), "{e}");
}

/// Read with meshio when it is installed (skips with a message otherwise). meshio 5
/// cannot read grids that mix VTK_POLYHEDRON with other cell types, so those are skipped.
fn meshio_check(p: &Path, m: &PolyMesh) {
    let types = cell_types(m);
    if types.iter().any(|t| t.is_none()) && types.iter().any(|t| t.is_some()) {
        eprintln!(
            "skipping the meshio check of {}: meshio cannot mix polyhedra with other cells",
            p.display()
        );
        return;
    }
    let ok = std::process::Command::new("python3")
        .args(["-c", "import meshio"])
        .output()
        .map(|o| o.status.success());
    if !matches!(ok, Ok(true)) {
        eprintln!("skipping the meshio check: python3 with meshio is not available");
        return;
    }
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import meshio,sys; m=meshio.read(sys.argv[1]); print(len(m.points), sum(len(c.data) for c in m.cells))",
        ])
        .arg(p)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "meshio failed on {}: {}",
        p.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let s = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        s.trim(),
        format!("{} {}", m.num_vertices(), m.num_cells()),
        "meshio counts for {}",
        p.display()
    );
}

#[test]
fn obj_surface_of_a_boundary() {
    let dir = tempfile::tempdir().unwrap();
    let m = box_mesh(BoxKind::Mixed, [2, 2, 1], [1.0, 1.0, 1.0]);
    let s = tessera_mesh::boundary::extract_boundary(&m).surface(&m);
    let p = dir.path().join("s.obj");
    write_obj(&p, &s.positions, &s.polygon_offsets, &s.polygon_vertices).unwrap();
    let text = std::fs::read_to_string(&p).unwrap();
    let v: Vec<[f64; 3]> = text
        .lines()
        .filter(|l| l.starts_with("v "))
        .map(|l| {
            let x: Vec<f64> = l[2..]
                .split_whitespace()
                .map(|t| t.parse().unwrap())
                .collect();
            [x[0], x[1], x[2]]
        })
        .collect();
    let f: Vec<Vec<u32>> = text
        .lines()
        .filter(|l| l.starts_with("f "))
        .map(|l| {
            l[2..]
                .split_whitespace()
                .map(|t| t.parse::<u32>().unwrap() - 1)
                .collect()
        })
        .collect();
    assert_eq!(v, s.positions);
    assert_eq!(f.len(), s.num_polygons());
    for (i, poly) in f.iter().enumerate() {
        assert_eq!(poly.as_slice(), s.polygon(i));
    }
    // bad polygon offsets are an error
    assert!(write_obj(&p, &s.positions, &[0, 2], &[0, 1]).is_err());
}

// ---------------------------------------------------------------------------------------
// malformed corpus

#[test]
fn malformed_files_give_clear_errors() {
    // (file, expected location, words the message must contain)
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "m41-truncated.msh",
            "line 19",
            &["number of nodes 13 cannot fit", "truncated"],
        ),
        (
            "m41-node-out-of-range.msh",
            "line 59",
            &["node 999", "not in `$Nodes`"],
        ),
        (
            "m41-wrong-count.msh",
            "line 51",
            &["announces 8 elements", "hold 7"],
        ),
        ("m41-nan.msh", "line 44", &["not finite"]),
        ("m41-degenerate.msh", "line 59", &["degenerate tetrahedron"]),
        (
            "m41-unknown-type.msh",
            "line 62",
            &["unknown element type 99"],
        ),
        ("m22-truncated.msh", "line 30", &["unexpected end of file"]),
        (
            "m22-unknown-type.msh",
            "line 34",
            &["unknown element type 77"],
        ),
        ("m22-nan.msh", "line 19", &["not finite"]),
        ("m22-node-out-of-range.msh", "line 30", &["node 91"]),
        (
            "m22-wrong-count.msh",
            "line 26",
            &["expected a node tag", "$EndNodes"],
        ),
        (
            "medit-out-of-range.mesh",
            "line 30",
            &["vertex index 13 out of range"],
        ),
        (
            "medit-truncated.mesh",
            "line 26",
            &["number of prisms 1 cannot fit", "truncated"],
        ),
        ("medit-nan.mesh", "line 15", &["not finite"]),
        (
            "medit-unknown-keyword.mesh",
            "line 22",
            &["unknown Medit keyword `Pyramidz`"],
        ),
        ("medit-degenerate.mesh", "line 24", &["degenerate pyramid"]),
        (
            "tg-wrong-count.node",
            "line 10",
            &["extra data", "wrong count"],
        ),
        (
            "tg-out-of-range.ele",
            "line 4",
            &["node number 9 out of range"],
        ),
        ("tg-nan.node", "line 5", &["not finite"]),
        (
            "ovm-out-of-range.ovm",
            "line 55",
            &["half-face 99 out of range"],
        ),
        (
            "ovm-truncated.ovm",
            "line 54",
            &["number of polyhedra 6 cannot fit", "truncated"],
        ),
        ("ovm-nan.ovm", "line 7", &["not finite"]),
        ("ovm-open-face.ovm", "line 35", &["closed loop"]),
    ];
    let dir = fixture("malformed");
    let mut seen = std::collections::BTreeSet::new();
    let mut problems = Vec::new();
    for (file, loc, words) in cases {
        let p = dir.join(file);
        seen.insert(p.file_stem().unwrap().to_string_lossy().into_owned());
        let r = std::panic::catch_unwind(|| read_mesh(&p));
        let e = match r {
            Err(_) => {
                problems.push(format!("{file}: the reader panicked"));
                continue;
            }
            Ok(Ok(_)) => {
                problems.push(format!("{file}: no error"));
                continue;
            }
            Ok(Err(e)) => e,
        };
        let msg = e.to_string();
        let ok = matches!(e, MeshError::Parse { .. })
            && !msg.contains('\n')
            && msg.contains(&format!("{}:{loc}:", p.display()))
            && words.iter().all(|w| msg.contains(w));
        if !ok {
            problems.push(format!("{file}: want {loc} and {words:?}, got: {msg}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // every malformed file is covered
    for entry in std::fs::read_dir(&dir).unwrap() {
        let p = entry.unwrap().path();
        let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
        assert!(seen.contains(&stem), "{} has no expectation", p.display());
    }
}

#[test]
fn unknown_extension_and_missing_file() {
    let e = read_mesh(Path::new("mesh.stl")).unwrap_err();
    assert!(
        matches!(e, MeshError::Unsupported(_)) && e.to_string().contains("mesh.stl"),
        "{e}"
    );
    let e = read_mesh(Path::new("/nonexistent/dir/x.msh")).unwrap_err();
    assert!(
        matches!(e, MeshError::Io { .. }) && e.to_string().contains("/nonexistent/dir/x.msh"),
        "{e}"
    );
}

// ---------------------------------------------------------------------------------------
// shared benchmark meshes (optional)

fn shared(name: &str) -> Option<PathBuf> {
    let p = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/meshes"
    ))
    .join(name);
    if p.exists() {
        Some(p)
    } else {
        eprintln!("skipping {name}: {} is absent", p.display());
        None
    }
}

#[test]
fn shared_meshes_match_their_readme() {
    // V, E, F, T, boundary faces, boundary vertices, Euler characteristic (README.md)
    let table: &[(&str, [i64; 7])] = &[
        ("armadillo-3k.msh.gz", [994, 5055, 7275, 3213, 1698, 851, 1]),
        (
            "bracket-7.9k.msh.gz",
            [2360, 12276, 17776, 7865, 4092, 2036, -5],
        ),
    ];
    for (name, want) in table {
        let Some(p) = shared(name) else { continue };
        let f = read(&p);
        let m = &f.mesh;
        let b = tessera_mesh::boundary::extract_boundary(m);
        let got = [
            m.num_vertices() as i64,
            m.num_edges() as i64,
            m.num_faces() as i64,
            m.num_cells() as i64,
            b.faces.len() as i64,
            b.vertices.len() as i64,
            m.euler_characteristic(),
        ];
        assert_eq!(&got, want, "{name}");
        assert!(b.manifold);
        if name.starts_with("bracket") {
            let solid = f.group("solid").unwrap();
            assert_eq!((solid.dim, solid.entities.len()), (3, m.num_cells()));
            let bfaces: std::collections::HashSet<u32> =
                b.faces.iter().map(|&x| decode(x).0).collect();
            for g in ["bolt_holes", "load_hole"] {
                let g = f.group(g).unwrap();
                assert_eq!(g.dim, 2);
                assert!(!g.entities.is_empty());
                assert!(
                    g.entities.iter().all(|f| bfaces.contains(f)),
                    "group faces are boundary faces"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// read_simplex_mesh: the direct path to the compact simplex mesh

/// Signed volume of tetrahedron `t`.
fn tet_volume(pos: &[[f64; 3]], t: &[u32]) -> f64 {
    let p = |i: usize| pos[t[i] as usize];
    let d = |i: usize| [p(i)[0] - p(0)[0], p(i)[1] - p(0)[1], p(i)[2] - p(0)[2]];
    let (a, b, c) = (d(1), d(2), d(3));
    a[0] * (b[1] * c[2] - b[2] * c[1]) - a[1] * (b[0] * c[2] - b[2] * c[0])
        + a[2] * (b[0] * c[1] - b[1] * c[0])
}

/// The direct simplex read equals the polyhedral read converted with `from_poly`: same
/// vertices, same cells as vertex sets (in file order), same edges and faces, positive
/// volumes, and the same groups.
fn check_simplex_read(p: &Path) {
    use tessera_mesh::io::read_simplex_mesh;
    use tessera_mesh::simplex::SimplexMesh;
    let direct = read_simplex_mesh(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let mf = read(p);
    let via = SimplexMesh::from_poly(&mf.mesh).unwrap();
    let (a, b) = (&direct.mesh, &via);
    assert_eq!(a.num_vertices(), b.num_vertices());
    assert_eq!(a.positions(), b.positions());
    assert_eq!(a.num_cells(), b.num_cells());
    let sorted = |m: &SimplexMesh| -> Vec<[u32; 4]> {
        let mut v: Vec<[u32; 4]> = (0..m.num_cells())
            .map(|c| {
                let mut t: [u32; 4] = m.cell(c).try_into().unwrap();
                t.sort_unstable();
                t
            })
            .collect();
        v.sort_unstable();
        v
    };
    assert_eq!(sorted(a), sorted(b), "same cells");
    for c in 0..a.num_cells() {
        assert!(
            tet_volume(a.positions(), a.cell(c)) > 0.0,
            "cell {c} positive"
        );
    }
    assert_eq!(a.edges(), b.edges());
    assert_eq!(a.faces(), b.faces());
    assert_eq!(direct.groups.len(), mf.groups.len());
    let fv = mf.mesh.face_vertices();
    for (g, h) in direct.groups.iter().zip(&mf.groups) {
        assert_eq!((g.dim, g.tag, &g.name), (h.dim, h.tag, &h.name));
        match g.dim {
            3 => assert_eq!(g.cells, h.entities),
            2 => {
                let mut want: Vec<[u32; 3]> = h
                    .entities
                    .iter()
                    .map(|&f| {
                        let mut t: Vec<u32> = fv.row(f as usize).iter().map(|&v| col(v)).collect();
                        t.sort_unstable();
                        [t[0], t[1], t[2]]
                    })
                    .collect();
                want.sort_unstable();
                assert_eq!(g.faces, want, "group {}", g.name);
            }
            _ => {}
        }
    }
}

#[test]
fn simplex_read_matches_polyhedral_read() {
    let dir = tempfile::tempdir().unwrap();
    // a tet box with an inverted cell, written as MSH 4.1 ASCII, MSH 4.1 binary
    // (write_mesh), Medit and TetGen
    let m = box_mesh(BoxKind::Tet, [3, 2, 2], [1.0, 0.5, 0.5]);
    for name in ["b.msh", "b.mesh", "b.node"] {
        let p = dir.path().join(name);
        write_mesh(&m, &p).unwrap();
        check_simplex_read(&p);
    }
    // an inverted tetrahedron in the file is oriented positive by the simplex path too
    let text = "$MeshFormat\n4.1 0 8\n$EndMeshFormat\n$Nodes\n1 4 1 4\n3 1 0 4\n1\n2\n3\n4\n0 0 0\n1 0 0\n0 1 0\n0 0 1\n$EndNodes\n$Elements\n1 1 1 1\n3 1 4 1\n1 1 3 2 4\n$EndElements\n";
    let p = dir.path().join("inv.msh");
    std::fs::write(&p, text).unwrap();
    check_simplex_read(&p);
    // a degenerate tetrahedron is an error at its line
    let flat = text.replace("0 0 1\n$EndNodes", "1 1 0\n$EndNodes");
    let p = dir.path().join("flat.msh");
    std::fs::write(&p, flat).unwrap();
    let e = tessera_mesh::io::read_simplex_mesh(&p)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("flat.msh") && e.contains("line 19") && e.contains("zero volume"),
        "{e}"
    );
    // shared meshes with groups when present
    for name in ["armadillo-3k.msh.gz", "bracket-7.9k.msh.gz"] {
        if let Some(p) = shared(name) {
            check_simplex_read(&p);
        }
    }
    // a mixed mesh is read through the polyhedral path and refused as non-simplicial
    let e = tessera_mesh::io::read_simplex_mesh(&fixture("mixed-v41.msh"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a tetrahedral mesh"), "{e}");
}

#[test]
fn simplex_read_rejects_a_group_triangle_that_is_not_a_face() {
    let dir = tempfile::tempdir().unwrap();
    // one tet (nodes 1-4) and a tagged triangle (1, 2, 5) whose node 5 is not a tet node
    let text = "$MeshFormat\n2.2 0 8\n$EndMeshFormat\n$Nodes\n5\n1 0 0 0\n2 1 0 0\n3 0 1 0\n4 0 0 1\n5 1 1 1\n$EndNodes\n$Elements\n2\n1 4 2 1 1 1 2 3 4\n2 2 2 7 7 1 2 5\n$EndElements\n";
    let p = dir.path().join("bad.msh");
    std::fs::write(&p, text).unwrap();
    let e = tessera_mesh::io::read_simplex_mesh(&p)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("bad.msh") && e.contains("line 15") && e.contains("is not a face"),
        "{e}"
    );
    let e2 = read_mesh(&p).unwrap_err().to_string();
    assert!(e2.contains("is not a face"), "{e2}");
}

/// Large ASCII element blocks take the parallel path: the mesh read back equals the
/// written one, and a bad line in the middle of such a block is still reported at its
/// line (the block is re-parsed token by token).
#[test]
fn large_msh_blocks_parse_in_parallel_with_exact_errors() {
    let dir = tempfile::tempdir().unwrap();
    let m = box_mesh(BoxKind::Tet, [20, 20, 16], [1.0, 1.0, 0.8]);
    assert!(m.num_cells() >= 1 << 15);
    let p = dir.path().join("big.msh");
    write_mesh(&m, &p).unwrap();
    // the same mesh through the (serial) Medit reader: identical after reading
    let pm = dir.path().join("big.mesh");
    write_mesh(&m, &pm).unwrap();
    let r = read(&p).mesh;
    assert_same(&read(&pm).mesh, &r, 0.0);
    assert_eq!(r.num_cells(), m.num_cells());
    let s = tessera_mesh::io::read_simplex_mesh(&p).unwrap();
    assert_eq!(s.mesh.num_cells(), m.num_cells());
    // corrupt one element line in the middle of the block: a node tag that does not exist
    let text = std::fs::read_to_string(&p).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.iter().position(|l| *l == "$Elements").unwrap();
    let target = start + 3 + m.num_cells() / 2; // header, block header, then elements
    let mut bad: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    let tag = bad[target].split_whitespace().next().unwrap().to_string();
    bad[target] = format!("{tag} 1 2 3 999999999");
    let q = dir.path().join("bad.msh");
    std::fs::write(&q, bad.join("\n") + "\n").unwrap();
    let e = read_mesh(&q).unwrap_err().to_string();
    assert!(
        e.contains(&format!("line {}", target + 1)) && e.contains("999999999"),
        "{e}"
    );
    // and a line with an extra token
    let mut bad2: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    bad2[target] = format!("{} 7", bad2[target]);
    let q2 = dir.path().join("bad2.msh");
    std::fs::write(&q2, bad2.join("\n") + "\n").unwrap();
    assert!(read_mesh(&q2).is_err());
}

/// Found by `cargo fuzz` (targets `medit` and `msh`): the mixed fixture with two vertices of
/// the hexahedron swapped. Its quadrilaterals share vertex sets with the neighbours' faces in
/// another cyclic order, so identifying faces by vertex set merged different faces and the
/// reader returned a mesh with a cell that is not closed (∂2 ∂3 ≠ 0). Now one error at the cell.
#[test]
fn twisted_mixed_cells_are_an_error_at_the_cell() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    for (name, location) in [
        ("medit/twisted-mixed-cells.mesh", "line "),
        ("msh/twisted-mixed-cells.msh", "line "),
    ] {
        let p = corpus.join(name);
        let e = match read_mesh(&p) {
            Ok(_) => panic!("{name}: a mesh with a cell that is not closed was accepted"),
            Err(e) => e.to_string(),
        };
        assert!(
            e.contains("not closed") && e.contains(location) && !e.contains('\n'),
            "{name}: {e}"
        );
    }
}
