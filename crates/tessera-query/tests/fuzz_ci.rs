//! The bounded-time fuzz run of CI (issue 8). `cargo test --workspace` runs the parser (and,
//! for inputs that compile, the IR lowering and the interpreter on one element) on a few
//! hundred thousand random byte strings and mutations of a seed corpus, stopping after a
//! time budget; nothing may panic and every error must carry a span inside the input.
//! For deeper runs use the cargo-fuzz target in `fuzz/` (see fuzz/README.md).

use std::time::{Duration, Instant};
use tessera_query::{Backend, Par, Query};

const FIELDS: [&str; 3] = ["VelocityX", "VelocityY", "Pressure"];
const CORPUS: &[&str] = &[
    "abs(Pressure)",
    "sqrt(VelocityX^2+VelocityY^2)",
    "(VelocityX^2+VelocityY^2)/2 + Pressure",
    "select(Pressure > 0, atan2(VelocityY, VelocityX), -pi)",
    "clamp(log2(abs(Pressure) + 1e-3), -10, 10) * e",
    "pow(VelocityX, 2.5) - VelocityY^-3 + min(1, max(2, 3))",
    "((((Pressure))))",
    "-(-(-VelocityX))^2^0.5",
    "floor(VelocityX) != ceil(VelocityY) <= 1",
    "sin(cos(tan(asin(acos(atan(exp(log(Pressure))))))))",
];

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const TOKENS: &[&str] = &[
    "(",
    ")",
    ",",
    "+",
    "-",
    "*",
    "/",
    "^",
    "<",
    "<=",
    "==",
    "!=",
    ">=",
    ">",
    "1",
    "1e",
    "1e9999",
    ".5",
    "e",
    "pi",
    "sqrt(",
    "atan2(",
    "select(",
    "Pressure",
    "VelocityX",
    " ",
    "\u{e9}",
    "\0",
    "9999999999999999999999",
];

fn mutate(r: &mut Rng, s: &str) -> Vec<u8> {
    let mut b = s.as_bytes().to_vec();
    for _ in 0..1 + r.below(4) {
        match r.below(5) {
            0 if !b.is_empty() => {
                let i = r.below(b.len());
                b.remove(i);
            }
            1 => {
                let i = r.below(b.len() + 1);
                b.insert(i, r.next() as u8);
            }
            2 => {
                let i = r.below(b.len() + 1);
                let t = TOKENS[r.below(TOKENS.len())].as_bytes();
                b.splice(i..i, t.iter().copied());
            }
            3 if !b.is_empty() => {
                let i = r.below(b.len());
                let j = i + r.below(b.len() - i);
                let chunk = b[i..=j.min(b.len() - 1)].to_vec();
                let k = r.below(b.len() + 1);
                b.splice(k..k, chunk);
            }
            _ => {
                if !b.is_empty() {
                    let i = r.below(b.len());
                    b[i] = b"()+-*/^,<>=!.e0123456789 aPsqrt"[r.below(31)];
                }
            }
        }
    }
    b
}

fn run_one(bytes: &[u8]) {
    let Ok(src) = std::str::from_utf8(bytes) else {
        return;
    };
    match Query::compile(src, &FIELDS) {
        Ok(q) => {
            let x = [[0.5f32], [-2.0f32], [3.0f32]];
            let mut o = [0.0f32];
            q.eval_cpu_with(Backend::Interp, Par::Seq, &[&x[0], &x[1], &x[2]], &mut o)
                .unwrap();
        }
        Err(e) => {
            let s = e
                .span()
                .unwrap_or_else(|| panic!("no span for `{src}`: {e}"));
            assert!(
                s.start <= s.end && s.end <= src.len(),
                "span {s:?} outside `{src}`"
            );
        }
    }
}

#[test]
fn parser_survives_random_and_mutated_inputs() {
    let budget = Duration::from_secs(
        std::env::var("TESSERA_FUZZ_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(6),
    );
    let target = 300_000usize;
    let t0 = Instant::now();
    let mut r = Rng(0x9E37_79B9_7F4A_7C15);
    let mut n = 0usize;
    while n < target && t0.elapsed() < budget {
        for _ in 0..1000 {
            let input = match r.below(3) {
                0 => {
                    let len = r.below(24);
                    (0..len).map(|_| r.next() as u8).collect::<Vec<u8>>()
                }
                1 => {
                    let len = r.below(12);
                    let mut v = Vec::new();
                    for _ in 0..len {
                        v.extend_from_slice(TOKENS[r.below(TOKENS.len())].as_bytes());
                    }
                    v
                }
                _ => {
                    let seed = CORPUS[r.below(CORPUS.len())];
                    mutate(&mut r, seed)
                }
            };
            run_one(&input);
            n += 1;
        }
    }
    eprintln!("fuzz_ci: {n} inputs in {:.1} s", t0.elapsed().as_secs_f64());
    assert!(n >= 20_000, "too few inputs in the time budget: {n}");
}

/// The field-file readers (cargo-fuzz target `query_fields`): random byte strings and
/// mutated `.npy` seeds decode to a whole number of values or give one bounded error line.
#[test]
fn field_files_decode_or_fail_cleanly() {
    use tessera_query::fields::decode_field;
    let mut r = Rng(0x1234_5678_9abc_def1);
    for len in 0..4096usize {
        let data: Vec<u8> = (0..len % 97 + len / 97).map(|_| r.next() as u8).collect();
        let f = std::path::Path::new("f");
        match decode_field::<f32>(f, &data) {
            Ok(v) => assert_eq!(v.len() * 4, data.len()),
            Err(e) => assert!(!data.len().is_multiple_of(4) && !e.to_string().contains('\n')),
        }
        match decode_field::<f64>(f, &data) {
            Ok(v) => assert_eq!(v.len() * 8, data.len()),
            Err(e) => assert!(!data.len().is_multiple_of(8) && !e.to_string().contains('\n')),
        }
    }
    // .npy: mutations of the corpus seeds
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/query_fields");
    let seeds: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect();
    let f = std::path::Path::new("f.npy");
    for i in 0..20_000 {
        let mut b = seeds[i % seeds.len()].clone();
        for _ in 0..1 + r.below(3) {
            let n = b.len();
            match r.below(4) {
                0 if n > 0 => {
                    let k = r.below(n);
                    b[k] = r.next() as u8;
                }
                1 => b.truncate(r.below(n + 1)),
                2 => {
                    let k = r.below(n + 1);
                    b.insert(k, b"0123456789(),' "[r.below(15)]);
                }
                _ if n > 0 => {
                    let k = r.below(n);
                    b.remove(k);
                }
                _ => {}
            }
        }
        match tessera_query::npy::parse_npy(f, &b) {
            Ok(a) => assert_eq!(a.values.len(), a.shape.iter().product::<usize>()),
            Err(e) => {
                let m = e.to_string();
                assert!(!m.contains('\n') && m.len() < 600, "{m}");
            }
        }
    }
}
