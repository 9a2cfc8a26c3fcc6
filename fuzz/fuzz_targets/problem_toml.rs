//! cargo-fuzz target: the problem file (TOML) parser and validator. Any UTF-8 input gives
//! a problem or one error line naming the file.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    tessera_fem::problem::fuzz_check(text);
});
