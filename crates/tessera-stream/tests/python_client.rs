//! The `.proto` compiles with a third-party protobuf toolchain (Python's grpcio-tools) and a
//! minimal Python client written from it (tests/python/client.py) receives and checks a frame:
//! the protocol is usable outside Tessera. Skips with a message when no Python with
//! grpcio-tools is found (`.ci/run` makes a venv and sets TESSERA_PYTHON).

use std::path::Path;
use std::process::Command;

use tessera_flow::AnalyticSource;
use tessera_stream::{serve, ServerConfig};

fn python() -> Option<String> {
    let py = std::env::var("TESSERA_PYTHON").unwrap_or_else(|_| "python3".into());
    let ok = Command::new(&py)
        .args(["-c", "import grpc_tools.protoc, google.protobuf"])
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then_some(py)
}

#[test]
fn python_client_generated_from_the_proto_receives_a_frame() {
    let Some(py) = python() else {
        if std::env::var_os("CI").is_some() {
            panic!("no Python with grpcio-tools on CI (.ci/run makes one and sets TESSERA_PYTHON)");
        }
        eprintln!("skipping: no Python with grpcio-tools (pip install grpcio-tools; or set TESSERA_PYTHON)");
        return;
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let gen = tempfile::tempdir().unwrap();
    let out = Command::new(&py)
        .args(["-m", "grpc_tools.protoc", "-I"])
        .arg(root.join("proto"))
        .arg(format!("--python_out={}", gen.path().display()))
        .arg(root.join("proto/tessera_stream.proto"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "protoc (grpcio-tools) rejected the .proto: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(gen.path().join("tessera_stream_pb2.py").is_file());

    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(async {
        let config = ServerConfig {
            bind: "127.0.0.1:0".parse().unwrap(),
            rate_hz: Some(50.0),
            ..Default::default()
        };
        serve(config, Box::new(AnalyticSource::new(48, 40, 0.01).unwrap()))
            .await
            .unwrap()
    });
    let out = Command::new(&py)
        .arg(root.join("tests/python/client.py"))
        .arg(gen.path())
        .arg(server.ws_url())
        .output()
        .unwrap();
    rt.block_on(server.shutdown());
    assert!(
        out.status.success(),
        "python client failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["simulation"], "analytic");
    assert_eq!(v["dims"], serde_json::json!([48, 40, 1]));
    assert_eq!(v["names"], serde_json::json!(["VelocityX", "VelocityX*2"]));
    assert_eq!(v["subscription"], 5);
    assert_eq!(v["count"], 48 * 40);
}
