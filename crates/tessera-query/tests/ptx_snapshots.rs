//! Golden snapshots of the emitted PTX (and CUDA C) for the three example expressions of
//! dissertation §6.4.3. The generator is deterministic, so the files in `tests/snapshots/`
//! are compared byte for byte; regenerate with `UPDATE_SNAPSHOTS=1 cargo test -p tessera-query`.

use tessera_query::{Precision, Query};

const FIELDS: [&str; 3] = ["VelocityX", "VelocityY", "Pressure"];
const EXPRS: [(&str, &str); 3] = [
    ("expr1_abs_pressure", "abs(Pressure)"),
    ("expr2_abs_velocity", "sqrt(VelocityX^2+VelocityY^2)"),
    (
        "expr3_total_energy",
        "(VelocityX^2+VelocityY^2)/2 + Pressure",
    ),
];

fn check(file: &str, got: &str) {
    let path = format!("{}/tests/snapshots/{file}", env!("CARGO_MANIFEST_DIR"));
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{path}: {e} (run with UPDATE_SNAPSHOTS=1)"));
    assert!(
        want == got,
        "{file} differs from the snapshot:\n--- want\n{want}\n--- got\n{got}"
    );
}

#[test]
fn ptx_of_the_section_6_4_3_examples_matches_snapshots() {
    for (name, e) in EXPRS {
        let q = Query::compile(e, &FIELDS).unwrap();
        check(&format!("{name}.f32.ptx"), &q.ptx(Precision::F32));
        check(&format!("{name}.f64.ptx"), &q.ptx(Precision::F64));
        check(&format!("{name}.f32.cu"), &q.cuda_c(Precision::F32));
        // deterministic: a second compile gives the same bytes
        assert_eq!(
            q.ptx(Precision::F32),
            Query::compile(e, &FIELDS).unwrap().ptx(Precision::F32)
        );
    }
}

#[test]
fn ptx_has_one_load_per_used_field_and_no_libdevice() {
    let q = Query::compile("(VelocityX^2+VelocityY^2)/2 + Pressure", &FIELDS).unwrap();
    let p = q.ptx(Precision::F32);
    assert_eq!(p.matches("ld.global.nc.f32").count(), 3);
    assert_eq!(p.matches("mul.rn.f32").count(), 3, "{p}"); // x*x, y*y, and /2 as *0.5 (exact)
    assert!(!p.contains("__nv_") && !p.contains(".extern"));
    let q = Query::compile("abs(Pressure)", &FIELDS).unwrap();
    assert_eq!(q.ptx(Precision::F32).matches("ld.global.nc.f32").count(), 1);
}

#[test]
fn every_operation_emits_well_formed_ptx() {
    // a structural check that runs without a GPU: registers used are declared, braces match
    let all = "select(a < b, atan2(a, b), pow(a, b)) + exp(a) + log(b) + log2(c) + sin(a) + cos(b) + tan(c) \
               + asin(a) + acos(b) + atan(c) + floor(a) + ceil(b) + min(a, b) + max(b, c) + clamp(a, b, c) \
               + (a <= b) + (a >= c) + (a == b) + (a != c) + (a > b) + sqrt(abs(a)) - -a / b";
    let q = Query::compile(all, &["a", "b", "c"]).unwrap();
    for p in [Precision::F32, Precision::F64] {
        let t = q.ptx(p);
        for (class, prefix) in [
            ("pred", "%p"),
            ("b32", "%r"),
            ("b64", "%rd"),
            ("f32", "%f"),
            ("f64", "%fd"),
        ] {
            let decl = t
                .lines()
                .find(|l| l.contains(&format!(".reg .{class} {prefix}<")));
            let max_used = t
                .match_indices(prefix)
                .filter_map(|(i, _)| {
                    let rest = &t[i + prefix.len()..];
                    let d: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
                    if d.is_empty() {
                        None
                    } else {
                        d.parse::<usize>().ok()
                    }
                })
                .max();
            if let Some(m) = max_used {
                let decl = decl.unwrap_or_else(|| panic!("{p:?}: {class} used but not declared"));
                let n: usize = decl
                    .split('<')
                    .nth(1)
                    .unwrap()
                    .trim_end_matches(">;")
                    .parse()
                    .unwrap();
                assert!(m < n, "{p:?}: {prefix}{m} used, {n} declared");
            }
        }
        assert_eq!(t.matches('{').count(), t.matches('}').count());
    }
}
