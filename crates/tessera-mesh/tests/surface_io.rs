//! Polygon surfaces in and out: OBJ, PLY (ASCII and binary, both byte orders) and OFF round
//! trips, boundary surfaces of volume meshes, and malformed inputs with file and line.

use std::path::{Path, PathBuf};
use tessera_mesh::io::{read_surface, write_surface, write_surface_with};
use tessera_mesh::mesh_matrix::shapes::{cube, icosphere};
use tessera_mesh::mesh_matrix::PolygonMesh;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tessera-surface-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A mixed surface: a cube with one face split into two triangles.
fn mixed() -> PolygonMesh {
    let c = cube();
    let (mut o, mut v) = c.matrix.to_face_table();
    // replace the last quad (1, 3, 7, 5) by two triangles
    v.truncate(20);
    o.truncate(6);
    v.extend_from_slice(&[1, 3, 7, 1, 7, 5]);
    o.push(23);
    o.push(26);
    PolygonMesh::new(c.positions, &o, &v).unwrap()
}

#[test]
fn round_trips_through_every_format() {
    let d = scratch("roundtrip");
    let mut s = icosphere(1);
    s.positions[3][0] = 0.1 + 1e-13; // digits that must survive
    for mesh in [s, mixed()] {
        for name in ["a.obj", "a.ply", "a.off", "a.obj.gz", "b.ply.gz"] {
            let p = d.join(name);
            write_surface(&p, &mesh).unwrap();
            let back = read_surface(&p).unwrap();
            assert_eq!(back, mesh, "{name}");
        }
        let p = d.join("ascii.ply");
        write_surface_with(&p, &mesh, None, true).unwrap();
        assert!(std::fs::read_to_string(&p)
            .unwrap()
            .contains("format ascii 1.0"));
        assert_eq!(read_surface(&p).unwrap(), mesh);
        // normals are written beside the positions and ignored on reading
        let n = vec![[0.0, 0.0, 1.0]; mesh.num_vertices()];
        for name in ["n.ply", "n.obj", "n.off"] {
            let p = d.join(name);
            write_surface_with(&p, &mesh, Some(&n), false).unwrap();
            assert_eq!(read_surface(&p).unwrap(), mesh, "{name}");
        }
        write_surface_with(&d.join("n.vtu"), &mesh, Some(&n), false).unwrap();
    }
}

#[test]
fn reads_big_endian_ply_with_float_coordinates_and_extra_properties() {
    let d = scratch("bigendian");
    let mut bytes = b"ply\nformat binary_big_endian 1.0\ncomment made by hand\nelement vertex 3\n\
property float y\nproperty float x\nproperty uchar red\nproperty float z\nelement face 1\n\
property uchar flags\nproperty list uchar uint vertex_indices\nelement edge 0\nproperty int vertex1\nend_header\n"
        .to_vec();
    for (x, y, z) in [(0.0f32, 0.0f32, 0.0f32), (1.0, 0.0, 0.0), (0.0, 1.0, 0.5)] {
        bytes.extend_from_slice(&y.to_be_bytes());
        bytes.extend_from_slice(&x.to_be_bytes());
        bytes.push(200);
        bytes.extend_from_slice(&z.to_be_bytes());
    }
    bytes.push(7);
    bytes.push(3);
    for v in [0u32, 1, 2] {
        bytes.extend_from_slice(&v.to_be_bytes());
    }
    let p = d.join("t.ply");
    std::fs::write(&p, &bytes).unwrap();
    let s = read_surface(&p).unwrap();
    assert_eq!(
        s.positions,
        vec![[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.5]]
    );
    assert_eq!(s.matrix.face(0), &[0, 1, 2]);
}

#[test]
fn obj_index_forms_negative_indices_and_other_statements() {
    let d = scratch("objforms");
    let p = d.join("t.obj");
    std::fs::write(
        &p,
        "# comment\nmtllib x.mtl\no thing\nv 0 0 0\nv 1 0 0 1.0\nv 1 1 0\nv 0 1 0\nvt 0 0\nvn 0 0 1\n\
         g group\nusemtl m\ns off\nf 1/1/1 2/1/1 3/1/1\nf -4//1 -2//1 -1//1\nl 1 2\n",
    )
    .unwrap();
    let s = read_surface(&p).unwrap();
    assert_eq!(s.num_vertices(), 4);
    assert_eq!(s.matrix.face(0), &[0, 1, 2]);
    assert_eq!(s.matrix.face(1), &[0, 2, 3]);
}

fn err(path: &Path) -> String {
    read_surface(path).unwrap_err().to_string()
}

#[test]
fn malformed_surfaces_name_file_and_line() {
    let d = scratch("malformed");
    let cases: &[(&str, &[u8], &str)] = &[
        ("a.obj", b"v 0 0 0\nv 1 0 0\nv 0 x 0\n", ":line 3: expected the y coordinate"),
        ("b.obj", b"v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2\n", ":line 4: a face needs at least 3"),
        ("c.obj", b"v 0 0 0\nv 1 0 0\nv 0 1 0\n\nf 1 2 9\n", ":line 5: vertex index 9 is beyond"),
        ("d.obj", b"v 0 0 0\nf 1 -3 2\n", ":line 2: relative vertex index -3"),
        ("e.obj", b"v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 2\n", "lists a vertex twice"),
        ("a.off", b"OFF\n3 1 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1 5\n", ":line 6: face 0 refers to vertex 5"),
        ("b.off", b"OFF\n300000 1 0\n0 0 0\n", ":line 2: the header announces 300000 vertices"),
        ("c.off", b"COFF\n3 1 0\n0 0 0 1 1 1 1\n1 0 0\n0 nan 0\n3 0 1 2\n", ":line 5: y coordinate is not finite"),
        ("d.off", b"NOT\n", ":line 1: not an OFF file"),
        ("a.ply", b"ply\nformat ascii 1.0\nelement vertex 99999999\nproperty float x\nend_header\n", ":line 3: the header announces 99999999"),
        ("b.ply", b"ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\nproperty float z\nelement face 1\nproperty list uchar int vertex_indices\nend_header\n0 0 0\n1 0 0\n0 1\n3 0 1 2\n", ":line 12: vertex 2 has too few values"),
        ("c.ply", b"ply\nformat binary_little_endian 1.0\nelement vertex 3\nproperty float x\nproperty float y\nproperty float z\nelement face 1\nproperty list uchar int vertex_indices\nend_header\n\0\0\0\0", ":line 3: the header announces 3 `vertex` elements"),
        ("g.ply", b"ply\nformat binary_little_endian 1.0\nelement vertex 1\nproperty uchar x\nproperty uchar y\nproperty uchar z\nelement face 1\nproperty list uchar int vertex_indices\nend_header\n\0\0\0\x03\0\0\0\0\0\0\0\0", "byte 181: unexpected end of data reading a list index"),
        ("d.ply", b"ply\nformat ascii 2.0\n", ":line 2: unsupported format"),
        ("e.ply", b"ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\n", "no `end_header`"),
        ("f.ply", b"ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\nelement face 1\nproperty list uchar int vertex_indices\nend_header\n", ":line 3: the `vertex` element lacks"),
        ("x.stl", b"solid\n", "unknown surface file extension"),
    ];
    for (name, bytes, want) in cases {
        let p = d.join(name);
        std::fs::write(&p, bytes).unwrap();
        let e = err(&p);
        assert!(e.contains(name), "{name}: {e}");
        assert!(e.contains(want), "{name}: `{e}` lacks `{want}`");
    }
}

#[test]
fn boundary_surface_of_a_volume_mesh() {
    let fx = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mixed-v41.msh");
    let fx = if fx.exists() {
        fx
    } else {
        PathBuf::from("crates/tessera-mesh/tests/fixtures/mixed-v41.msh")
    };
    let s = read_surface(&fx).unwrap();
    assert!(s.num_faces() > 0);
    assert_eq!(
        s.euler_characteristic(),
        2,
        "the boundary of a ball is a sphere"
    );
    tessera_mesh::mesh_matrix::edges::half_edges(&s.matrix).unwrap();
}
