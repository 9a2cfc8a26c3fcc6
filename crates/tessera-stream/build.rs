//! Compiles `proto/tessera_stream.proto` with protox (a protobuf compiler in pure Rust, no
//! `protoc` binary) and generates the Rust types with prost.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/tessera_stream.proto");
    let fds = protox::compile(["tessera_stream.proto"], ["proto"])?;
    prost_build::Config::new().compile_fds(fds)?;
    Ok(())
}
