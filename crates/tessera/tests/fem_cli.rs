//! `tessera fem assemble` on the command line (dissertation §4.4): the JSON fields of issue 5
//! and the `--device` choice. No GPU needed; the GPU-only assertions skip when one is present.

use std::process::{Command, Output};

fn tessera(args: &[&str]) -> Output {
    Command::new(
        std::env::var_os("TESSERA_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_tessera").into()),
    )
    .args(args)
    .output()
    .expect("run tessera")
}

fn assemble_json(args: &[&str]) -> serde_json::Value {
    let o = tessera(args);
    assert!(
        o.status.success(),
        "tessera {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let out = String::from_utf8(o.stdout).unwrap();
    assert_eq!(
        out.trim().lines().count(),
        1,
        "one JSON object on one line: {out}"
    );
    serde_json::from_str(&out).expect("valid JSON")
}

/// Whether a CUDA device is usable here (`auto` picks it, and names it on stderr).
fn gpu_present() -> bool {
    let o = tessera(&["fem", "assemble", "gen:box:1", "--json", "--device", "auto"]);
    String::from_utf8_lossy(&o.stderr).contains("device cuda:")
}

#[test]
fn assemble_json_fields_on_the_cpu() {
    let v = assemble_json(&[
        "fem",
        "assemble",
        "gen:box:3",
        "--order",
        "2",
        "--json",
        "--device",
        "cpu",
    ]);
    // gen:box:3: 4^3 vertices; p = 2 adds one node per edge. 3 DOFs per node.
    let nodes = v["nodes"].as_u64().expect("nodes");
    assert_eq!(v["dofs"].as_u64(), Some(3 * nodes), "{v}");
    assert_eq!(v["device"], "cpu");
    assert_eq!(v["precision"], "f64", "f64 is the CPU default");
    assert_eq!(v["order"], 2);
    let blocks = v["block_nonzeros"].as_u64().expect("block_nonzeros");
    let bound = v["zayer_bound"].as_u64().expect("zayer_bound");
    // every row has at least its diagonal block; the Zayer et al. bound is an upper bound
    assert!(blocks >= nodes && blocks <= nodes * nodes, "{v}");
    assert!(bound >= blocks, "bound {bound} < exact {blocks}");
    assert!(v["bytes_allocated"].as_u64().expect("bytes_allocated") > 0);
    assert!(
        v["padding_blocks"].as_u64().is_some(),
        "padding_blocks: {v}"
    );
    let fro = v["frobenius_norm"].as_f64().expect("frobenius_norm");
    assert!(fro.is_finite() && fro > 0.0, "{fro}");
    let stages = v["stages_ms"].as_object().expect("stages_ms object");
    assert!(stages.contains_key("total") && stages.len() > 1, "{v}");
}

#[test]
fn cuda_without_a_gpu_is_one_line() {
    if gpu_present() {
        eprintln!("a CUDA GPU is present: skipping the no-GPU error assertion");
        return;
    }
    let o = tessera(&["fem", "assemble", "gen:box:2", "--json", "--device", "cuda"]);
    assert!(!o.status.success(), "--device cuda must fail without a GPU");
    assert!(o.stdout.is_empty(), "no JSON on failure");
    let err = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one error line, got: {err}");
    assert!(lines[0].contains("cuda"), "{err}");
}

#[test]
fn inline_summation_above_p1_on_cuda_is_one_line() {
    // checked before any device is opened: the same line with or without a GPU
    let o = tessera(&[
        "fem",
        "assemble",
        "gen:box:2",
        "--order",
        "2",
        "--summation",
        "inline",
        "--device",
        "cuda",
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one error line, got: {err}");
    assert!(
        lines[0].contains("inline") && lines[0].contains("p = 1"),
        "{err}"
    );
}

#[test]
fn auto_names_the_device_and_matches_the_cpu_pattern() {
    let cpu = assemble_json(&[
        "fem",
        "assemble",
        "gen:box:2",
        "--json",
        "--device",
        "cpu",
        "--precision",
        "f32",
    ]);
    let auto = assemble_json(&[
        "fem",
        "assemble",
        "gen:box:2",
        "--json",
        "--device",
        "auto",
        "--precision",
        "f32",
    ]);
    let dev = auto["device"].as_str().expect("device");
    assert!(dev == "cpu" || dev.starts_with("cuda:"), "{dev}");
    // the exact pattern is the same on every device; values to f32 rounding
    for k in ["dofs", "block_nonzeros", "zayer_bound", "padding_blocks"] {
        assert_eq!(cpu[k], auto[k], "{k}");
    }
    let (a, b) = (
        cpu["frobenius_norm"].as_f64().unwrap(),
        auto["frobenius_norm"].as_f64().unwrap(),
    );
    assert!((a - b).abs() <= 1e-5 * a, "{a} vs {b}");
}
