//! cargo-fuzz target: the TetGen `.node` + `.ele` reader. The input is split at its first
//! NUL byte into the two files (no NUL: all `.node`, an empty `.ele`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tessera_mesh::io::fuzz::check_tetgen(data);
});
