//! The bounded-time fuzz run of CI for the mesh readers and the gzip layer. `cargo test`
//! mutates the seed corpora of the cargo-fuzz targets (`fuzz/corpus/{msh,medit,ovm,vtu,
//! tetgen,surface,gzip}`, written by `scripts/make-fuzz-corpus.py`) with byte edits, truncations, line
//! duplications and hostile numbers (0, -1, 2^31, 2^32 + 3, 4e9, 1e308, nan) for
//! `TESSERA_FUZZ_SECS` seconds (default 6; `TESSERA_FUZZ_SEED` varies the run), and checks the properties of
//! `tessera_mesh::io::fuzz` on each input: no panic, one bounded error line naming the file,
//! accepted meshes valid. A counting allocator checks that no input allocates more than
//! 64 MiB + 64 bytes per input byte. For deeper runs see fuzz/README.md.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tessera_core::input::{gunzip, GzipLimits};
use tessera_mesh::io::{fuzz, Format, SurfaceFormat};

mod common;
use common::counting_alloc::measured;

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

const NUMBERS: &[&str] = &[
    "0",
    "-1",
    "1",
    "2147483648",
    "4294967299",
    "4000000000",
    "18446744073709551615",
    "1e308",
    "nan",
    "inf",
    "-0",
    "",
    "3.5",
];

/// Start and end of number-like tokens.
fn numbers(b: &[u8]) -> Vec<(usize, usize)> {
    let mut v = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit() || b[i] == b'-' {
            let s = i;
            while i < b.len() && (b[i].is_ascii_digit() || b".-+eE".contains(&b[i])) {
                i += 1;
            }
            v.push((s, i));
        } else {
            i += 1;
        }
    }
    v
}

fn mutate(r: &mut Rng, seed: &[u8], other: &[u8]) -> Vec<u8> {
    let mut b = seed.to_vec();
    for _ in 0..1 + r.below(3) {
        let n = b.len();
        match r.below(8) {
            0 if n > 0 => {
                let i = r.below(n);
                b[i] ^= 1 << r.below(8);
            }
            1 => {
                let i = r.below(n + 1);
                b.insert(i, b"0123456789 \n-.$#"[r.below(16)]);
            }
            2 if n > 0 => {
                let i = r.below(n);
                let j = (i + 1 + r.below(16)).min(n);
                b.drain(i..j);
            }
            3 => b.truncate(r.below(n + 1)),
            4 => {
                let nums = numbers(&b);
                if !nums.is_empty() {
                    let (s, e) = nums[r.below(nums.len())];
                    b.splice(s..e, NUMBERS[r.below(NUMBERS.len())].bytes());
                }
            }
            5 => {
                // duplicate a line
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
            6 if !other.is_empty() => {
                // splice a piece of another seed
                let i = r.below(other.len());
                let j = (i + r.below(256)).min(other.len());
                let at = r.below(n + 1);
                b.splice(at..at, other[i..j].iter().copied());
            }
            _ => {
                let i = r.below(n + 1);
                b.insert(i, r.next() as u8);
            }
        }
    }
    b
}

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

fn budget() -> Duration {
    Duration::from_secs_f64(
        std::env::var("TESSERA_FUZZ_SECS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(6.0),
    )
}

/// Run `check` on `input` and fail on a heap peak above the input's allowance.
fn bounded(input: &[u8], check: impl FnOnce(&[u8])) {
    let ((), peak, _) = measured(|| check(input));
    let allowed = (64 << 20) + 64 * input.len();
    if peak > allowed {
        let dump = std::env::temp_dir().join("tessera-fuzz-ci-alloc.bin");
        let _ = std::fs::write(&dump, input);
        panic!(
            "an input of {} bytes allocated {peak} bytes (saved to {})",
            input.len(),
            dump.display()
        );
    }
}

#[test]
fn readers_survive_mutated_inputs() {
    type Check = fn(&[u8]);
    let targets: Vec<(&str, Check)> = vec![
        ("msh", |d| fuzz::check_reader(Format::Msh, "fuzz.msh", d)),
        ("medit", |d| {
            fuzz::check_reader(Format::Medit, "fuzz.mesh", d)
        }),
        ("ovm", |d| fuzz::check_reader(Format::Ovm, "fuzz.ovm", d)),
        ("vtu", |d| fuzz::check_reader(Format::Vtu, "fuzz.vtu", d)),
        ("tetgen", fuzz::check_tetgen),
        // the first byte picks OBJ / PLY / OFF, as in the cargo-fuzz target
        ("surface", |d| {
            if let Some((&pick, rest)) = d.split_first() {
                let (fmt, label) = match pick % 3 {
                    0 => (SurfaceFormat::Obj, "fuzz.obj"),
                    1 => (SurfaceFormat::Ply, "fuzz.ply"),
                    _ => (SurfaceFormat::Off, "fuzz.off"),
                };
                fuzz::check_surface(fmt, label, rest);
            }
        }),
        ("gzip", |d| {
            let lim = GzipLimits {
                max_ratio: 250,
                max_bytes: 64 << 20,
            };
            match gunzip(Path::new("fuzz.gz"), d, &lim) {
                Ok(out) => assert!(out.len() as u64 <= lim.max_bytes),
                Err(e) => {
                    let m = e.to_string();
                    assert!(m.starts_with("fuzz.gz: ") && !m.contains('\n'), "{m}");
                }
            }
        }),
    ];
    let seeds: Vec<Vec<Vec<u8>>> = targets.iter().map(|(t, _)| corpus(t)).collect();
    // every seed as is first (the corpus includes valid files of every variant)
    for ((_, check), s) in targets.iter().zip(&seeds) {
        for input in s {
            bounded(input, check);
        }
    }
    let t0 = Instant::now();
    // TESSERA_FUZZ_SEED varies the run (CI uses the fixed default, so failures reproduce)
    let seed = std::env::var("TESSERA_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0x9e37_79b9_7f4a_7c15)
        | 1;
    let mut r = Rng(seed);
    let mut n = 0u64;
    let deadline = budget();
    while t0.elapsed() < deadline {
        for ((name, check), s) in targets.iter().zip(&seeds) {
            for _ in 0..32 {
                let a = &s[r.below(s.len())];
                let b = &s[r.below(s.len())];
                let input = mutate(&mut r, a, b);
                let res = std::panic::catch_unwind(|| bounded(&input, check));
                if res.is_err() {
                    let dump = std::env::temp_dir().join(format!("tessera-fuzz-ci-{name}.bin"));
                    let _ = std::fs::write(&dump, &input);
                    panic!("{name}: failing input saved to {}", dump.display());
                }
                n += 1;
            }
        }
    }
    eprintln!(
        "fuzz_ci (mesh readers, gzip): {n} inputs in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}

#[test]
fn valid_seeds_are_accepted() {
    // the binary seeds are hand-built: make sure they are meshes, so mutations start from
    // files that reach every section
    for name in ["seed-bin22.msh", "seed-bin41.msh", "seed-bin41-be.msh"] {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fuzz/corpus/msh")
            .join(name);
        let m = tessera_mesh::io::read_mesh(&p).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(m.mesh.num_cells(), 2, "{name}");
        assert_eq!(m.groups.len(), 2, "{name}: {:?}", m.groups);
    }
    for (name, cells) in [
        ("two-tets-ascii.vtu", 2),
        ("two-tets-base64.vtu", 2),
        ("two-tets-raw.vtu", 2),
        ("two-tets-zlib.vtu", 2),
        ("polyhedron.vtu", 1),
        ("quadratic-tet.vtu", 1),
    ] {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fuzz/corpus/vtu")
            .join(name);
        let m = tessera_mesh::io::read_mesh(&p).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(m.mesh.num_cells(), cells, "{name}");
    }
}
