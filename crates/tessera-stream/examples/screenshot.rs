//! Screenshot of the browser client (docs/stream-browser.png):
//! `cargo run -p tessera-stream --example screenshot -- OUT.png [SCENE] [WxH] [SECONDS] [QUERY]`
//! starts a server, lets the simulation run SECONDS, opens the page in headless Chromium with
//! the coolwarm map and the given field or expression, and saves a PNG.

use std::time::Duration;

use tessera_stream::browser::Browser;
use tessera_stream::{serve, source, ServerConfig};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let out = args
        .first()
        .ok_or("usage: screenshot OUT.png [SCENE] [WxH] [SECONDS] [QUERY]")?;
    let scene = args.get(1).map_or("cylinder2d", |s| s.as_str());
    let grid = args.get(2).map(|g| source::parse_grid(g)).transpose()?;
    let secs: f64 = args.get(3).map_or(Ok(5.0), |s| s.parse())?;
    let query = args.get(4).cloned().unwrap_or_else(|| "VelocityX".into());
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        let sim = source::open(scene, grid, None)?;
        let config = ServerConfig { bind: "127.0.0.1:0".parse()?, ..Default::default() };
        let server = serve(config, sim).await?;
        let mut b = Browser::launch(1100, 560).await?;
        let q = if query.chars().all(|c| c.is_ascii_alphanumeric()) {
            format!("field={query}")
        } else {
            format!("expr={}", query.replace('+', "%2B").replace('^', "%5E").replace(' ', "%20"))
        };
        b.navigate(&format!("{}?{q}&colormap=coolwarm", server.url(None))).await?;
        b.wait_for("window.tessera && tessera.state.frame", Duration::from_secs(60)).await?;
        tokio::time::sleep(Duration::from_secs_f64(secs)).await;
        let r = b.eval("(() => { const r = document.getElementById('view2d').getBoundingClientRect(); return [r.left + r.width * 0.62, r.top + r.height * 0.55]; })()").await?;
        let (x, y) = (r[0].as_f64().unwrap_or(0.0), r[1].as_f64().unwrap_or(0.0));
        b.mouse("mouseMoved", x, y, false).await?;
        tokio::time::sleep(Duration::from_millis(700)).await;
        std::fs::write(out, b.screenshot().await?)?;
        drop(b);
        server.shutdown().await;
        Ok::<_, Box<dyn std::error::Error>>(())
    })
}
