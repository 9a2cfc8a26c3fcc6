//! Snapshot tests of the code generator (dissertation §5.3.2): the generated CUDA source is
//! byte-identical across runs and equal to the committed snapshots. No GPU needed.
//! `UPDATE_SNAPSHOTS=1 cargo test -p tessera-spmv --test codegen` rewrites the snapshots.

use tessera_spmv::codegen::generate;
use tessera_spmv::{EntrySpec, Layout, Precision, Schedule, ScheduleKind};

const USER_SPEC: &str = r#"
name = "scaled_complex"
[matrix]
fields = [{ name = "re", type = "real" }, { name = "im", type = "real" }]
[multiply]
re = "a.re*x.re - a.im*x.im"
im = "0.5*a.re*x.im + 2*a.im*x.re"
[zero]
re = 0.0
"#;

fn cases() -> Vec<(
    &'static str,
    EntrySpec,
    Precision,
    &'static str,
    Vec<Schedule>,
)> {
    let st = |n_b, n_t| Schedule {
        kind: ScheduleKind::Static,
        n_b,
        n_t,
    };
    let dy = |n_b, n_t| Schedule {
        kind: ScheduleKind::Dynamic,
        n_b,
        n_t,
    };
    let b = |n: &str| EntrySpec::builtin(n).unwrap();
    vec![
        (
            "complex_f32_csr-aos-aos",
            b("complex"),
            Precision::F32,
            "csr-aos-aos",
            vec![st(4, 256)],
        ),
        (
            "quaternion_f64_ell-soa-aos",
            b("quaternion"),
            Precision::F64,
            "ell-soa-aos",
            vec![dy(8, 128)],
        ),
        (
            "block3_f32_sell32-soa-soa",
            b("block3"),
            Precision::F32,
            "sell32-soa-soa",
            vec![st(2, 512), dy(6, 96)],
        ),
        (
            "dualquat_f64_sell16-aos-soa",
            b("dualquat"),
            Precision::F64,
            "sell16-aos-soa",
            vec![st(1, 1024)],
        ),
        (
            "user_f32_csr-soa-aos",
            EntrySpec::from_toml_str(USER_SPEC, "user.toml").unwrap(),
            Precision::F32,
            "csr-soa-aos",
            vec![dy(3, 64)],
        ),
    ]
}

#[test]
fn generated_sources_match_snapshots() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/snapshots");
    let update = std::env::var_os("UPDATE_SNAPSHOTS").is_some();
    for (name, spec, p, layout, scheds) in cases() {
        let layout: Layout = layout.parse().unwrap();
        let a = generate(&spec, p, layout, &scheds).unwrap();
        let b = generate(&spec, p, layout, &scheds).unwrap();
        assert_eq!(
            a.as_bytes(),
            b.as_bytes(),
            "{name}: rendering is not deterministic"
        );
        let path = format!("{dir}/{name}.cu");
        if update {
            std::fs::write(&path, &a).unwrap();
        }
        let want = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{path}: {e} (run with UPDATE_SNAPSHOTS=1)"));
        assert_eq!(
            a, want,
            "{name}: generated source differs from the snapshot {path}"
        );
    }
}

#[test]
fn generated_source_contents() {
    let spec = EntrySpec::builtin("block3").unwrap();
    let s = Schedule {
        kind: ScheduleKind::Dynamic,
        n_b: 6,
        n_t: 192,
    };
    let src = generate(&spec, Precision::F64, "ell-aos-aos".parse().unwrap(), &[s]).unwrap();
    assert!(src.contains("__launch_bounds__(192, 6) tessera_spmv_dynamic_nt192_nb6("));
    assert!(src.contains("const real* __restrict__ x"));
    assert!(src.contains("atomicAdd(sched, 1u)"));
    // 72-byte 3x3 double block: alignment 8; 24-byte 3-vector: alignment 8
    assert!(src.contains("struct __align__(8) MatrixEntry"));
    assert!(src.contains("struct __align__(8) VectorEntry"));
    assert!(src.contains("typedef double real;"));
    // every product term of the 3x3 block appears
    for i in 0..3 {
        for j in 0..3 {
            assert!(src.contains(&format!("acc.v{i} += a.m{i}{j} * xv.v{j};")));
        }
    }
    let q = generate(
        &EntrySpec::builtin("quaternion").unwrap(),
        Precision::F32,
        "sell16-soa-soa".parse().unwrap(),
        &[s],
    )
    .unwrap();
    assert!(q.contains("struct __align__(16) MatrixEntry"));
    assert!(q.contains("p += 16u"));
    assert!(q.contains("a.qz = vals[3ull * slots + p];"));
    assert!(q.contains("acc.qw -= a.qx * xv.qx;"));
    assert!(q.contains("acc.qw = 0.0f;"));
}

/// Writes every variant the GPU conformance test compiles to `$TESSERA_SPMV_DUMP/` (for
/// offline NVRTC syntax checks); does nothing without the variable.
#[test]
fn dump_all_variants_when_asked() {
    let Some(dir) = std::env::var_os("TESSERA_SPMV_DUMP") else {
        return;
    };
    std::fs::create_dir_all(&dir).unwrap();
    let scheds = tessera_spmv::gpu::conformance_schedules();
    for e in ["real", "complex", "quaternion", "dualquat", "block3"] {
        let spec = EntrySpec::builtin(e).unwrap();
        for p in Precision::ALL {
            for l in Layout::all() {
                let src = generate(&spec, p, l, &scheds).unwrap();
                std::fs::write(
                    std::path::Path::new(&dir).join(format!("{e}_{p}_{l}.cu")),
                    src,
                )
                .unwrap();
            }
        }
    }
}

/// Writes one module with the diagonal schedules to `$TESSERA_SPMV_DUMP_DIAG` (compile-time probe).
#[test]
fn dump_diagonal_module_when_asked() {
    let Some(dir) = std::env::var_os("TESSERA_SPMV_DUMP_DIAG") else {
        return;
    };
    std::fs::create_dir_all(&dir).unwrap();
    let lim = tessera_spmv::DeviceLimits::h100();
    let d = lim.diagonal_schedules();
    let a = lim.all_schedules();
    let spec = EntrySpec::builtin("block3").unwrap();
    let src = generate(&spec, Precision::F64, "sell32-aos-soa".parse().unwrap(), &d).unwrap();
    std::fs::write(std::path::Path::new(&dir).join("diag.cu"), src).unwrap();
    let src = generate(&spec, Precision::F64, "sell32-aos-soa".parse().unwrap(), &a).unwrap();
    std::fs::write(std::path::Path::new(&dir).join("all.cu"), src).unwrap();
    eprintln!("diagonal {} all {}", d.len(), a.len());
}
