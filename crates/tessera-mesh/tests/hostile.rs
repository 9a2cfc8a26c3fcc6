//! Hostile inputs (the reliability campaign's reproducers, `tests/fixtures/hostile/`,
//! written by `scripts/make-hostile-corpus.py`): header counts the file cannot hold, gzip
//! bombs, special files, and files that were silently accepted before. Each ends in one
//! clear error at the right line within 2 s, and the reader's peak heap stays under
//! 200 MB (measured by a counting allocator in this test binary).

use std::path::{Path, PathBuf};
use std::time::Duration;
use tessera_mesh::io::{read_mesh, read_mesh_with, read_simplex_mesh, ReadOptions};
use tessera_mesh::MeshError;

mod common;
use common::counting_alloc::measured;

/// Tests of this binary run one at a time (the peak is process-wide).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

const PEAK_LIMIT: usize = 200_000_000;
const TIME_LIMIT: Duration = Duration::from_secs(2);

fn hostile(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/hostile")
        .join(name)
}

/// Expectations: (file, location, words the one-line message must contain).
#[rustfmt::skip]
const CASES: &[(&str, &str, &[&str])] = &[
    // huge counts
    ("m41-huge-nodes.msh", "line 5", &["number of nodes 4000000000 cannot fit"]),
    ("m41-huge-tag-range.msh", "line 5", &["number of nodes 600000000 cannot fit"]),
    ("m41-huge-node-block.msh", "line 6", &["nodes in the block 4000000000 cannot fit"]),
    ("m41-huge-element-block.msh", "line 18", &["elements in the block 4000000000 cannot fit"]),
    ("m41-huge-physical-names.msh", "line 5", &["physical names 4000000000 cannot fit"]),
    ("m41-huge-entities.msh", "line 5", &["number of points 4000000000 cannot fit"]),
    ("m22-huge-nodes.msh", "line 5", &["number of nodes 4000000000 cannot fit"]),
    ("m22-huge-elements.msh", "line 9", &["number of elements 4000000000 cannot fit"]),
    ("m22-bin-huge-nodes.msh", "byte 47", &["number of nodes 4000000000 cannot fit"]),
    ("m41-bin-huge-nodes.msh", "byte 55", &["number of nodes 4000000000 cannot fit"]),
    ("medit-huge-vertices.mesh", "line 4", &["number of vertices 4000000000 cannot fit"]),
    ("medit-huge-tetrahedra.mesh", "line 7", &["number of tetrahedra 4000000000 cannot fit"]),
    ("tg-huge.node", "line 1", &["number of points 4000000000 cannot fit"]),
    ("tg-huge-ele.ele", "line 1", &["number of tetrahedra 4000000000 cannot fit"]),
    ("ovm-huge-vertices.ovm", "line 3", &["number of vertices 1000000000 cannot fit"]),
    ("ovm-huge-edges.ovm", "line 13", &["number of edges 1000000000 cannot fit"]),
    ("ovm-huge-faces.ovm", "line 34", &["number of faces 1000000000 cannot fit"]),
    ("ovm-huge-polyhedra.ovm", "line 54", &["number of polyhedra 1000000000 cannot fit"]),
    // silently accepted before
    ("m22-bin-negative-node.msh", "byte", &["references node -3", "node tags start at 1"]),
    ("m41-node-tag-0.msh", "line 21", &["node tag 0 is not allowed"]),
    ("m41-physical-tag-wide.msh", "line 15", &["physical tag 4294967299 is out of range", "32-bit"]),
    ("m22-physical-tag-wide.msh", "line 34", &["element tag 4294967299 is out of range"]),
    ("m41-duplicate-cell.msh", "line 60", &["tetrahedron repeats the tetrahedron at line 59"]),
    ("m22-duplicate-cell.msh", "line 33", &["tetrahedron repeats the tetrahedron at line 32"]),
    ("m41-repeated-elements.msh", "line 67", &["repeated `$Elements` section", "line 50"]),
    ("m22-repeated-nodes.msh", "line 27", &["repeated `$Nodes` section", "line 11"]),
    ("ovm-open-polyhedron.ovm", "line 55", &["polyhedron 0 is not a closed manifold"]),
    ("ovm-flipped-halfface.ovm", "line 55", &["not consistently oriented"]),
    ("ovm-two-vertex-face.ovm", "line 53", &["face 18 has 2 distinct vertices"]),
    ("ovm-duplicate-face.ovm", "line 53", &["face 18 has the same vertices as face 0"]),
    ("ovm-no-polyhedra.ovm", "line 54", &["no polyhedra"]),
    ("ovm-truncated-2.ovm", "line 60", &["ends inside the last polyhedron", "truncated"]),
    ("tg-truncated-2.ele", "line 7", &["ends inside the last tetrahedron", "truncated"]),
    ("tg-truncated-node.node", "line 10", &["ends inside the last point", "truncated"]),
    ("medit-no-end.mesh", "line 40", &["missing `End`", "truncated"]),
    ("medit-repeated-vertices.mesh", "line 19", &["repeated `Vertices` section", "line 5"]),
    ("medit-duplicate-cell.mesh", "line 31", &["tetrahedron repeats the tetrahedron at line 30"]),
    ("tg-duplicate-cell.ele", "line 8", &["tetrahedron repeats the tetrahedron at line 2"]),
];

#[test]
fn hostile_files_end_in_one_clear_error_quickly_and_small() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = hostile("");
    let mut seen = std::collections::BTreeSet::new();
    let mut problems = Vec::new();
    for &(file, loc, words) in CASES {
        let p = dir.join(file);
        seen.insert(p.file_stem().unwrap().to_string_lossy().into_owned());
        for simplex in [false, true] {
            let (r, peak, dt) = measured(|| {
                std::panic::catch_unwind(|| {
                    if simplex {
                        read_simplex_mesh(&p).map(|_| ())
                    } else {
                        read_mesh(&p).map(|_| ())
                    }
                })
            });
            let e = match r {
                Err(_) => {
                    problems.push(format!("{file}: the reader panicked"));
                    continue;
                }
                Ok(Ok(())) => {
                    problems.push(format!("{file}: accepted (simplex: {simplex})"));
                    continue;
                }
                Ok(Err(e)) => e,
            };
            let msg = e.to_string();
            let ok = matches!(e, MeshError::Parse { .. })
                && !msg.contains('\n')
                && msg.len() < 400
                && msg.contains(&format!("{}:{loc}", p.display()))
                && words.iter().all(|w| msg.contains(w));
            if !ok {
                problems.push(format!("{file}: want {loc} and {words:?}, got: {msg}"));
            }
            if peak > PEAK_LIMIT || dt > TIME_LIMIT {
                problems.push(format!("{file}: peak heap {peak} bytes, {dt:?}"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    for entry in std::fs::read_dir(&dir).unwrap() {
        let p = entry.unwrap().path();
        let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
        assert!(seen.contains(&stem), "{} has no expectation", p.display());
    }
}

#[test]
fn duplicates_are_dropped_when_allowed() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let opts = ReadOptions {
        allow_duplicates: true,
    };
    for (file, cells) in [
        ("m41-duplicate-cell.msh", 4),
        ("m22-duplicate-cell.msh", 4),
        ("medit-duplicate-cell.mesh", 4),
        ("tg-duplicate-cell.ele", 6),
    ] {
        let m = read_mesh_with(&hostile(file), &opts).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(m.mesh.num_cells(), cells, "{file}");
        m.mesh.validate().unwrap();
    }
}

/// A gzip member of `n` zero bytes.
fn gz_zeros(n: usize) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(&vec![0u8; n]).unwrap();
    e.finish().unwrap()
}

#[test]
fn gzip_bombs_end_in_one_clear_error() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = std::env::temp_dir().join(format!("tessera-hostile-gz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // 16 MB of gzip members that inflate to 16 GiB (the bomb)
    let member = gz_zeros(64 << 20);
    let mut bomb = Vec::with_capacity(member.len() * 256);
    for _ in 0..256 {
        bomb.extend_from_slice(&member);
    }
    let p = dir.join("bomb.msh.gz");
    std::fs::write(&p, &bomb).unwrap();
    drop(bomb);
    let (r, peak, dt) = measured(|| read_mesh(&p));
    let Err(e) = r else {
        panic!("a bomb is refused")
    };
    let msg = e.to_string();
    assert!(
        msg.contains("bomb.msh.gz: the gzip stream inflates more than 250-fold")
            && msg.contains("TESSERA_GZIP_MAX_RATIO")
            && !msg.contains('\n'),
        "{msg}"
    );
    // the compressed file itself is read (16 MB); the inflated output stops at ~32 MiB
    assert!(peak < PEAK_LIMIT, "peak heap {peak}");
    assert!(dt < TIME_LIMIT, "{dt:?}");
    // a name ending in .gz without the magic bytes
    let q = dir.join("plain.msh.gz");
    std::fs::write(&q, b"$MeshFormat\n").unwrap();
    let msg = read_mesh(&q).err().unwrap().to_string();
    assert!(msg.contains("does not start with the gzip magic"), "{msg}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn special_files_are_refused() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // /dev/zero as a mesh: refused before reading, not read until memory runs out
    let dir = std::env::temp_dir().join(format!("tessera-hostile-dev-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let link = dir.join("zero.msh");
    std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
    let (r, peak, dt) = measured(|| read_mesh(&link));
    let Err(e) = r else { panic!("refused") };
    let msg = e.to_string();
    assert!(
        msg.ends_with("zero.msh: is a character device, not a regular file"),
        "{msg}"
    );
    assert!(peak < 1 << 20 && dt < TIME_LIMIT);
    // a FIFO with no writer does not hang
    let fifo = dir.join("pipe.ovm");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a valid NUL-terminated path.
    assert_eq!(unsafe { libc_mkfifo(c.as_ptr(), 0o600) }, 0);
    let Err(e) = read_mesh(&fifo) else {
        panic!("refused")
    };
    let msg = e.to_string();
    assert!(msg.contains("is a FIFO"), "{msg}");
    // a directory named like a mesh
    let d = dir.join("dir.mesh");
    std::fs::create_dir(&d).unwrap();
    let Err(e) = read_mesh(&d) else {
        panic!("refused")
    };
    let msg = e.to_string();
    assert!(
        msg.ends_with("dir.mesh: is a directory, not a regular file"),
        "{msg}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

extern "C" {
    #[link_name = "mkfifo"]
    fn libc_mkfifo(path: *const std::ffi::c_char, mode: u32) -> i32;
}
