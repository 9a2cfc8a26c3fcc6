//! `tessera stream bench`: the streaming benchmarks of dissertation §6.4.1-6.4.2 (Table 6.1,
//! Figs. 6.8/6.9) against a running server (`--url`) or one started in-process.

use std::time::Duration;

use anyhow::{anyhow, Context};
use clap::{Args, Subcommand};
use tessera_core::DeviceChoice;
use tessera_stream::bench::{self, StreamRun, TABLE_6_1};
use tessera_stream::{serve, source, ServerConfig};

#[derive(Args, Debug)]
pub struct StreamArgs {
    #[command(subcommand)]
    cmd: StreamCmd,
}

#[derive(Subcommand, Debug)]
enum StreamCmd {
    /// Table 6.1 (serialize/deserialize per frame) and Figs. 6.8/6.9 (frames/s and MB/s vs
    /// link bandwidth, 1-3 fields of 1024², N outstanding requests).
    Bench(BenchArgs),
}

#[derive(Args, Debug)]
struct BenchArgs {
    /// A running server's stream (ws://host:port/ws[?token=T]); without it a server is started
    /// in-process with --sim/--grid/--device.
    #[arg(long)]
    url: Option<String>,
    /// Scene of the in-process server.
    #[arg(long, default_value = "analytic")]
    sim: String,
    /// Grid of the in-process server (WxH).
    #[arg(long, default_value = "1024x1024")]
    grid: String,
    /// auto, cpu, cuda or cuda:N for the in-process server.
    #[arg(long, default_value = "auto")]
    device: DeviceChoice,
    /// Numbers of fields (of Pressure, VelocityX, VelocityY), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "3")]
    fields: Vec<usize>,
    /// Frame requests kept outstanding (N), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "2")]
    outstanding: Vec<u32>,
    /// Link bandwidths in Mbit/s through an application-level token-bucket relay,
    /// comma-separated (0 = no limit).
    #[arg(long, value_delimiter = ',', default_value = "0")]
    limit_mbit: Vec<f64>,
    /// Measured seconds per run (after warm-up).
    #[arg(long, default_value_t = 4.0)]
    seconds: f64,
    /// Warm-up seconds per run.
    #[arg(long, default_value_t = 1.0)]
    warmup: f64,
    /// Frames per Table 6.1 column (in-process only).
    #[arg(long, default_value_t = 30)]
    reps: usize,
    /// Skip Table 6.1.
    #[arg(long)]
    no_table: bool,
    /// Also measure the browser client in headless Chromium (decode, frames/s, draws/s).
    #[arg(long)]
    browser: bool,
    /// Print results as one JSON object.
    #[arg(long)]
    json: bool,
}

pub fn run(a: StreamArgs) -> anyhow::Result<()> {
    match a.cmd {
        StreamCmd::Bench(b) => bench_cmd(b),
    }
}

fn bench_cmd(a: BenchArgs) -> anyhow::Result<()> {
    for &f in &a.fields {
        if !(1..=3).contains(&f) {
            return Err(anyhow!("--fields {f}: 1, 2 or 3"));
        }
    }
    if a.outstanding.contains(&0) {
        return Err(anyhow!("--outstanding must be at least 1"));
    }
    let rt = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let mut report = serde_json::Map::new();
    let mut text = String::new();
    let grid = source::parse_grid(&a.grid)?;
    let backend = if a.url.is_none() {
        let b = crate::device::resolve(a.device)?;
        if !a.json {
            eprintln!("device: {}", b.describe());
        }
        Some(b)
    } else {
        None
    };
    // Table 6.1 needs the simulation in this process.
    if let (Some(b), false) = (&backend, a.no_table) {
        let mut sim = source::open(&a.sim, Some(grid), b.gpu().cloned())?;
        let t = bench::table_6_1(sim.as_mut(), a.reps)?;
        let mut rows = Vec::new();
        for (name, v) in TABLE_6_1 {
            rows.push(
                std::iter::once(format!("dissertation: {name}"))
                    .chain(v.iter().map(|x| format!("{x:.2}")))
                    .collect(),
            );
        }
        rows.push(
            std::iter::once(format!("ours: serialization ({})", b.describe()))
                .chain(t.iter().map(|x| format!("{:.3}", x.serialize_ms)))
                .collect(),
        );
        rows.push(
            std::iter::once("ours: deserialization, Rust client".to_string())
                .chain(t.iter().map(|x| format!("{:.3}", x.deserialize_ms)))
                .collect(),
        );
        rows.push(
            std::iter::once("floor: copy of the payload at 10 GB/s (host memcpy)".to_string())
                .chain(
                    t.iter()
                        .map(|x| format!("{:.3}", x.frame_bytes as f64 / 10e9 * 1e3)),
                )
                .collect(),
        );
        text += &format!(
            "Table 6.1: ms per frame of 1, 2, 3 fields of {}x{} (median of {})\n",
            grid[0], grid[1], a.reps
        );
        text += &bench::table(&["", "1 field", "2 fields", "3 fields"], &rows);
        report.insert(
            "table_6_1".into(),
            serde_json::json!(t
                .iter()
                .map(
                    |x| serde_json::json!({"fields": x.fields, "serialize_ms": x.serialize_ms,
                    "deserialize_ms": x.deserialize_ms, "frame_bytes": x.frame_bytes})
                )
                .collect::<Vec<_>>()),
        );
    }
    let results = rt.block_on(async {
        let server = match (&a.url, &backend) {
            (None, Some(b)) => {
                let sim = source::open(&a.sim, Some(grid), b.gpu().cloned())?;
                let cfg = ServerConfig {
                    bind: "127.0.0.1:0".parse().expect("address"),
                    send_timeout: Duration::from_secs(120),
                    ..Default::default()
                };
                Some(serve(cfg, sim).await?)
            }
            _ => None,
        };
        let url = match (&a.url, &server) {
            (Some(u), _) => u.clone(),
            (None, Some(s)) => s.ws_url(),
            _ => unreachable!("a server was started"),
        };
        let mut runs = Vec::new();
        for &limit in &a.limit_mbit {
            for &fields in &a.fields {
                for &n in &a.outstanding {
                    runs.push(StreamRun {
                        url: url.clone(),
                        fields,
                        outstanding: n,
                        limit_mbit: (limit > 0.0).then_some(limit),
                        seconds: a.seconds,
                        warmup: a.warmup,
                    });
                }
            }
        }
        let bar = if a.json || !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            indicatif::ProgressBar::hidden()
        } else {
            indicatif::ProgressBar::new(runs.len() as u64)
        };
        let mut results = Vec::new();
        for r in &runs {
            bar.set_message(format!(
                "{} field(s), N = {}, {}",
                r.fields,
                r.outstanding,
                r.limit_mbit
                    .map_or("no limit".into(), |m| format!("{m} Mbit/s"))
            ));
            results.push(bench::stream(r).await?);
            bar.inc(1);
        }
        bar.finish_and_clear();
        let browser = if a.browser {
            let page = url.replacen("ws://", "http://", 1).replacen("/ws", "/", 1);
            Some(bench::browser_decode(&page, a.seconds.min(3.0)).await)
        } else {
            None
        };
        if let Some(s) = server {
            s.shutdown().await;
        }
        Ok::<_, anyhow::Error>((results, browser))
    })?;
    let (results, browser) = results;
    let per_field = grid[0] * grid[1] * 4;
    text += &format!(
        "\nFigs. 6.8/6.9: streaming {}x{} fields to the Rust client over loopback{}\n",
        grid[0],
        grid[1],
        if a.limit_mbit.iter().any(|&m| m > 0.0) {
            " (limited links: application-level token bucket relay, not tc)"
        } else {
            ""
        }
    );
    text += "dissertation: 1 field reaches the server's rate at >= 500 Mbit/s; double buffering (N = 2) used up to 50 % more bandwidth than N = 1\n";
    text += &bench::stream_table(&results, per_field);
    report.insert(
        "stream".into(),
        serde_json::json!(results
            .iter()
            .map(
                |r| serde_json::json!({"fields": r.fields, "outstanding": r.outstanding,
                "limit_mbit": r.limit_mbit, "client_fps": r.client_fps, "server_fps": r.server_fps,
                "payload_mb_s": r.payload_mb_s, "wire_mb_s": r.wire_mb_s,
                "utilization": r.utilization, "latency_ms": r.latency_ms, "decode_ms": r.decode_ms,
                "frames": r.frames})
            )
            .collect::<Vec<_>>()),
    );
    if let Some(b) = browser {
        match b {
            Ok(v) => {
                let rows: Vec<Vec<String>> = v
                    .iter()
                    .map(|r| {
                        vec![
                            r.fields.to_string(),
                            format!("{:.3}", r.decode_ms),
                            format!("{:.4}", r.decode_loop_ms),
                            format!("{:.2}", TABLE_6_1[2].1[r.fields - 1]),
                            format!("{:.1}", r.fps),
                            format!("{:.1}", r.draws_per_s),
                        ]
                    })
                    .collect();
                text +=
                    "\nBrowser client (headless Chromium, SwiftShader WebGL2): decode per frame\n";
                text += &bench::table(
                    &[
                        "fields",
                        "decode ms (median, 0.1 ms timer)",
                        "decode ms (loop)",
                        "dissertation Chrome ms",
                        "frames/s",
                        "draws/s",
                    ],
                    &rows,
                );
                report.insert(
                    "browser".into(),
                    serde_json::json!(v
                        .iter()
                        .map(
                            |r| serde_json::json!({"fields": r.fields, "decode_ms": r.decode_ms, "decode_loop_ms": r.decode_loop_ms,
                            "fps": r.fps, "draws_per_s": r.draws_per_s})
                        )
                        .collect::<Vec<_>>()),
                );
            }
            Err(e) => text += &format!("\nbrowser: not measured: {e}\n"),
        }
    }
    if a.json {
        println!("{}", serde_json::Value::Object(report));
    } else {
        print!("{text}");
    }
    Ok(())
}
