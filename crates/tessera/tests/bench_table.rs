//! `tessera bench fem-solve` prints a table whose rows line up with its header: one value per
//! column, the stage columns in the order the stages ran, and no GPU stage on a CPU run.

use std::process::Command;
use tessera_core::table::parse_markdown_row;

#[test]
fn bench_fem_solve_rows_line_up_with_the_header() {
    let bin =
        std::env::var_os("TESSERA_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_tessera").into());
    let o = Command::new(bin)
        .args([
            "bench",
            "fem-solve",
            "--case",
            "gen:bracket:12@1",
            "--device",
            "cpu",
            "--repeat",
            "1",
        ])
        .output()
        .expect("run tessera");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8(o.stdout).unwrap();
    let rows: Vec<Vec<String>> = out.lines().filter_map(parse_markdown_row).collect();
    assert!(rows.len() >= 3, "header, rule and a row: {out}");
    let (head, rule, body) = (&rows[0], &rows[1], &rows[2..]);
    assert!(
        rule.iter().all(|c| c.chars().all(|x| x == '-' || x == ':')),
        "{out}"
    );
    assert_eq!(rule.len(), head.len());
    for r in body {
        assert_eq!(r.len(), head.len(), "row {r:?} vs header {head:?}");
    }
    let col = |name: &str| head.iter().position(|h| h == name);
    // the stages in run order, and no GPU stage on the CPU
    let stages: Vec<&str> = head
        .iter()
        .filter_map(|h| h.strip_suffix(" ms"))
        .filter(|h| *h != "total")
        .collect();
    // run order: load, preprocess, assemble, (a preconditioner setup,) solve
    let at = |s: &str| stages.iter().position(|x| *x == s);
    let order: Vec<Option<usize>> = ["load", "preprocess", "assemble", "solve"]
        .iter()
        .map(|s| at(s))
        .collect();
    assert!(
        order.iter().all(|p| p.is_some()) && order.windows(2).all(|w| w[0] < w[1]),
        "{head:?}"
    );
    if let Some(setup) = at("setup") {
        assert!(order[2] < Some(setup) && Some(setup) < order[3], "{head:?}");
    }
    assert!(col("gpu_init ms").is_none() && col("upload ms").is_none());
    let r = &body[0];
    assert_eq!(r[col("device").unwrap()], "cpu");
    let total: f64 = r[col("total ms").unwrap()].parse().unwrap();
    let solve: f64 = r[col("solve ms").unwrap()].parse().unwrap();
    let assemble: f64 = r[col("assemble ms").unwrap()].parse().unwrap();
    assert!(
        solve > 0.0 && assemble > 0.0 && total >= solve + assemble * 0.99,
        "{r:?}"
    );
    assert!(r[col("iters").unwrap()].parse::<usize>().unwrap() > 0);
}
