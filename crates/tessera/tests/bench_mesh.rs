//! `tessera bench mesh` on a small generated bracket, CPU only: every field the JSON report
//! promises (Tables 3.1-3.4 columns) is there, times are positive, and the automatic
//! Catmull-Clark level count respects `--max-entities`.

use std::process::Command;

fn num(v: &serde_json::Value, k: &str) -> f64 {
    v[k].as_f64()
        .unwrap_or_else(|| panic!("`{k}` is not a number in {v}"))
}

/// `tessera bench mesh --device cpu --json ARGS` on the bracket of resolution 12: the JSON
/// document, after checking the exit status and the one-line CPU-only note on stderr.
fn bench_mesh_json(args: &[&str]) -> serde_json::Value {
    let o = Command::new(
        std::env::var_os("TESSERA_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_tessera").into()),
    )
    .args([
        "bench",
        "mesh",
        "--device",
        "cpu",
        "--resolution",
        "12",
        "--json",
    ])
    .args(args)
    .output()
    .expect("run tessera");
    assert!(
        o.status.success(),
        "tessera bench mesh {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("CPU columns only"),
        "the one-line CPU-only note"
    );
    serde_json::from_slice(&o.stdout).expect("stdout is one JSON document")
}

#[test]
fn bench_mesh_json_on_a_small_bracket() {
    const MAX_ENTITIES: u64 = 200_000;
    let v = bench_mesh_json(&[
        "--runs",
        "5",
        "--max-entities",
        &MAX_ENTITIES.to_string(),
        "--subdivision-runs",
        "1",
    ]);
    let meshes = v.as_array().expect("an array with one object per mesh");
    assert_eq!(meshes.len(), 1);
    let m = &meshes[0];
    assert!(m["mesh"].as_str().unwrap().starts_with("bracket"));
    for k in [
        "vertices",
        "edges",
        "faces",
        "cells",
        "topology_bytes",
        "table_3_1_bytes",
        "threads",
    ] {
        assert!(num(m, k) > 0.0, "{k} in {m}");
    }
    assert_eq!(num(m, "runs"), 5.0);
    assert_eq!(m["pinned"], false, "not pinned without --pin");
    assert!(
        m["gpu_device"].is_null() && m["gpu_error"].is_null(),
        "--device cpu has no GPU columns"
    );
    let ops = m["ops"].as_array().unwrap();
    let names: Vec<&str> = ops.iter().map(|o| o["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "Transpose Cells",
            "Transpose Faces",
            "Transpose Edges",
            "Cell Edges",
            "Cell Vertices",
            "Face Vertices",
            "Surface Extraction",
            "Laplacian Smoothing"
        ]
    );
    for op in ops {
        assert!(
            num(op, "ms_1_thread") > 0.0 && num(op, "ms_all_threads") > 0.0,
            "{op}"
        );
        assert!(op["gpu"].is_null(), "{op}");
        // a generated bracket is none of the dissertation's meshes
        assert!(
            op["paper_cpu_ms"].is_null()
                && op["paper_gpu_ms"].is_null()
                && op["paper_ovm_ms"].is_null()
        );
    }
    let sub = &m["subdivision"];
    assert!(sub["levels_rule"].as_str().unwrap().starts_with("auto"));
    let levels = sub["levels"].as_array().unwrap();
    assert!(
        !levels.is_empty(),
        "level 1 of a ~1.3k-cell bracket fits in {MAX_ENTITIES} entities"
    );
    let mut prev_cells = num(m, "cells");
    for (i, l) in levels.iter().enumerate() {
        assert_eq!(num(l, "level"), (i + 1) as f64);
        for k in [
            "pre_ms_1_thread",
            "total_ms_1_thread",
            "pre_ms_all_threads",
            "total_ms_all_threads",
        ] {
            assert!(num(l, k) > 0.0, "{k} in {l}");
        }
        let out = &l["output"];
        for k in ["vertices", "edges", "faces", "cells"] {
            assert!(
                (num(out, k) as u64) < MAX_ENTITIES,
                "level {} output {k} over the limit: {out}",
                i + 1
            );
        }
        // every tetrahedron becomes 4 hexahedra, every hexahedron 8 (dissertation Eq. 3.4)
        assert!(num(out, "cells") >= 4.0 * prev_cells, "{out}");
        prev_cells = num(out, "cells");
    }
    // the 1632-cell bracket: level 2 has 52k cells and 168k edges (< 200k), level 3 over 1M
    // edges, so the automatic rule takes exactly 2 levels
    assert_eq!(levels.len(), 2, "{sub}");
}

/// `--pin`: the pools' workers pinned to CPUs, recorded in the report, the same operations
/// timed for every thread count.
#[test]
fn bench_mesh_with_pinned_pools() {
    let v = bench_mesh_json(&["--levels", "0", "--threads", "1,2,3", "--pin"]);
    let m = &v[0];
    assert_eq!(m["pinned"], true, "{m}");
    assert_eq!(num(m, "threads"), 3.0, "the last thread count: {m}");
    let ops = m["ops"].as_array().unwrap();
    assert_eq!(ops.len(), 8);
    for op in ops {
        let t: Vec<f64> = op["threads_ms"]
            .as_array()
            .unwrap_or_else(|| panic!("threads_ms in {op}"))
            .iter()
            .map(|f| num(f, "ms"))
            .collect();
        assert_eq!(t.len(), 3, "{op}");
        assert!(t.iter().all(|&x| x > 0.0), "{op}");
    }
}
