//! `tessera serve [--sim SCENE] [--grid WxH] [--device D] [--bind ADDR] [--token T]`: the
//! streaming server (dissertation §6.3): open the printed URL in a browser.
//! `tessera serve --results OUT/ [--slice z:0.5] [--displace S]` serves a finished `fem solve`
//! instead: a slice in the 2D view, the boundary surface in the 3D view.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, Context};
use clap::Args;
use tessera_core::DeviceChoice;
use tessera_stream::results::open_results;
use tessera_stream::{serve, source, ServerConfig};

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Simulation scene: cylinder2d, smoke2d (cut-cell fluid), shallow-water,
    /// shallow-water-rain (floods, with a 3D view), analytic (closed-form Taylor-Green source).
    #[arg(long, default_value = "cylinder2d")]
    pub sim: String,
    /// Grid as WxH (default: the scene's).
    #[arg(long)]
    pub grid: Option<String>,
    /// auto, cpu, cuda or cuda:N (auto: CUDA device 0 when usable, else the CPU).
    #[arg(long, default_value = "auto")]
    pub device: DeviceChoice,
    /// Address to listen on; binds loopback only unless told otherwise.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub bind: SocketAddr,
    /// Require this token (`/?token=T`) for the page and the stream.
    #[arg(long)]
    pub token: Option<String>,
    /// Most simulation steps per second (default: as fast as it runs).
    #[arg(long)]
    pub rate: Option<f64>,
    /// Most clients at once.
    #[arg(long, default_value_t = 128)]
    pub max_clients: usize,
    /// Seconds one message may take to send before a client that stopped reading is dropped.
    #[arg(long, default_value_t = 30.0)]
    pub send_timeout: f64,
    /// Serve the fields of a finished `tessera fem solve` (its output folder or a .vtu file)
    /// instead of a simulation: a slice plane through the result resampled to a grid.
    #[arg(long, value_name = "OUT/")]
    pub results: Option<PathBuf>,
    /// Slice plane of --results: the axis it is normal to and its position as a fraction of
    /// the body's extent along it.
    #[arg(long, value_name = "AXIS:FRACTION", default_value = "z:0.5")]
    pub slice: tessera_stream::results::SlicePlane,
    /// Cells along the longer side of the --results slice.
    #[arg(long, default_value_t = 512)]
    pub resolution: usize,
    /// The 3D view of --results shows the boundary surface moved by this factor times the
    /// displacement (0: the undeformed body).
    #[arg(long, default_value_t = 0.0)]
    pub displace: f64,
    /// Serve the web client from this folder instead of the embedded copy (development).
    #[arg(long)]
    pub web_dir: Option<PathBuf>,
    /// Stop after this many seconds (default: run until interrupted).
    #[arg(long)]
    pub seconds: Option<f64>,
}

pub fn run(a: ServeArgs) -> anyhow::Result<()> {
    let backend = crate::device::resolve(a.device)?;
    eprintln!("device: {}", backend.describe());
    let (sim, rate, scene3d): (Box<dyn tessera_flow::Simulation>, _, _) = match &a.results {
        Some(dir) => {
            let (sim, surface) = open_results(dir, a.slice, a.resolution, a.displace)?;
            // the result does not change: a few frames per second are enough
            (Box::new(sim), Some(a.rate.unwrap_or(10.0)), Some(surface))
        }
        None => {
            let grid = a.grid.as_deref().map(source::parse_grid).transpose()?;
            let sim = source::open(&a.sim, grid, backend.gpu().cloned())?;
            (sim, a.rate, source::scene3d(&a.sim))
        }
    };
    let title = sim.name().to_string();
    let [nx, ny, _] = sim.grid().dims;
    if !(a.send_timeout.is_finite() && a.send_timeout > 0.0) {
        return Err(anyhow!(
            "--send-timeout {}: must be positive",
            a.send_timeout
        ));
    }
    let config = ServerConfig {
        bind: a.bind,
        token: a.token.clone(),
        max_clients: a.max_clients,
        send_timeout: Duration::from_secs_f64(a.send_timeout),
        rate_hz: rate,
        web_dir: a.web_dir,
        scene3d,
        ..Default::default()
    };
    let rt = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    rt.block_on(async move {
        let server = serve(config, sim).await?;
        eprintln!(
            "serving `{}` ({nx}x{ny}) at {}  (stream: {}; protocol: http://{}/tessera_stream.proto)",
            title,
            server.url(a.token.as_deref()),
            server.ws_url(),
            server.local_addr()
        );
        match a.seconds {
            Some(s) => tokio::time::sleep(Duration::from_secs_f64(s.max(0.0))).await,
            None => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
        eprintln!("stopping");
        server.shutdown().await;
        Ok::<_, anyhow::Error>(())
    })
}
