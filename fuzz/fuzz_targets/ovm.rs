//! cargo-fuzz target: the OpenVolumeMesh ASCII reader. Any input gives either a mesh that passes
//! `validate()` or one error line naming the file; header counts never allocate more than
//! the input can hold (run with `-malloc_limit_mb`, see fuzz/README.md).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tessera_mesh::io::fuzz::check_reader(tessera_mesh::io::Format::Ovm, "fuzz.ovm", data);
});
