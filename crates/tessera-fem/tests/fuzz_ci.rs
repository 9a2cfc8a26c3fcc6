//! The bounded-time fuzz run of CI for problem files: `cargo test` mutates the seed corpus of
//! the cargo-fuzz target `problem_toml` (`fuzz/corpus/problem_toml`) with byte edits, line
//! duplications, hostile values and TOML tokens for `TESSERA_FUZZ_SECS` seconds (default 4)
//! and checks `tessera_fem::problem::fuzz_check` on each: no panic, a problem or one error
//! line of bounded length naming the file. Also: every accepted problem with a generated
//! mesh has a memory estimate (no overflow, no panic). For deeper runs see fuzz/README.md.

use std::path::Path;
use std::time::{Duration, Instant};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const TOKENS: &[&str] = &[
    "[",
    "]",
    "[[",
    "]]",
    "{",
    "}",
    "=",
    ",",
    "\"",
    "'",
    "\n",
    "#",
    ".",
    "0",
    "-1",
    "1e308",
    "nan",
    "inf",
    "-inf",
    "400",
    "401",
    "1000",
    "9223372036854775807",
    "true",
    "\"x\"",
    "order",
    "mesh",
    "generate",
    "box",
    "cells",
    "bracket",
    "file",
    "material",
    "youngs",
    "poisson",
    "fixed",
    "loads",
    "selector",
    "type",
    "solver",
    "method",
    "\"cholesky\"",
    "\"group\"",
    "\"plane\"",
    "\u{e9}",
    "\u{0}",
    "[1, 2, 3]",
    "{ a = 1 }",
];

fn mutate(r: &mut Rng, s: &[u8]) -> Vec<u8> {
    let mut b = s.to_vec();
    for _ in 0..1 + r.below(4) {
        let n = b.len();
        match r.below(6) {
            0 if n > 0 => {
                let i = r.below(n);
                b.remove(i);
            }
            1 => {
                let i = r.below(n + 1);
                let t = TOKENS[r.below(TOKENS.len())];
                b.splice(i..i, t.bytes());
            }
            2 if n > 0 => {
                let i = r.below(n);
                let j = (i + 1 + r.below(24)).min(n);
                b.drain(i..j);
            }
            3 => b.truncate(r.below(n + 1)),
            4 => {
                let lines: Vec<usize> = std::iter::once(0)
                    .chain(
                        b.iter()
                            .enumerate()
                            .filter(|x| *x.1 == b'\n')
                            .map(|x| x.0 + 1),
                    )
                    .collect();
                if lines.len() > 2 {
                    let k = r.below(lines.len() - 1);
                    let line = b[lines[k]..lines[k + 1]].to_vec();
                    let at = lines[r.below(lines.len())];
                    b.splice(at..at, line);
                }
            }
            _ => {
                let i = r.below(n + 1);
                b.insert(i, r.next() as u8);
            }
        }
    }
    b
}

#[test]
fn problem_files_survive_mutated_inputs() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/problem_toml");
    let mut seeds: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect();
    seeds.sort();
    let budget = Duration::from_secs_f64(
        std::env::var("TESSERA_FUZZ_SECS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(4.0),
    );
    let seed = std::env::var("TESSERA_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0x2545_f491_4f6c_dd1d)
        | 1;
    let mut r = Rng(seed);
    let t0 = Instant::now();
    let mut n = 0u64;
    while t0.elapsed() < budget {
        let k = r.below(seeds.len());
        let input = mutate(&mut r, &seeds[k]);
        let Ok(text) = std::str::from_utf8(&input) else {
            continue;
        };
        let res = std::panic::catch_unwind(|| {
            tessera_fem::problem::fuzz_check(text);
            if let Ok(p) = tessera_fem::problem::Problem::parse(text, "f.toml", Path::new(".")) {
                if let Some(c) = tessera_fem::estimate::source_counts(&p.mesh) {
                    tessera_fem::estimate::static_solve_bytes(p.order, &c, p.solver.method);
                }
            }
        });
        if res.is_err() {
            let dump = std::env::temp_dir().join("tessera-fuzz-ci-problem.toml");
            let _ = std::fs::write(&dump, &input);
            panic!("failing input saved to {}", dump.display());
        }
        n += 1;
    }
    eprintln!(
        "fuzz_ci (problem files): {n} inputs in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}
