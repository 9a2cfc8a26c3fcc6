// Browser decode benchmark of rixel frames: serves crates/tessera-render/web and a folder of
// frames (from `tessera render bench --frames-out DIR`) on 127.0.0.1, opens
// decode-bench.html in headless Chromium, and prints the decode times it posts back.
//
//   node crates/tessera-render/web/bench/run.mjs DIR [--chromium /usr/bin/chromium]
import http from "node:http";
import fs from "node:fs";
import path from "node:path";
import os from "node:os";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const web = path.resolve(here, "..");
const args = process.argv.slice(2);
const dir = args[0];
if (!dir) { console.error("usage: run.mjs FRAMES_DIR [--chromium PATH]"); process.exit(2); }
const ci = args.indexOf("--chromium");
const chromium = ci >= 0 ? args[ci + 1] : (process.env.CHROMIUM || "/usr/bin/chromium");
const frames = fs.readdirSync(dir).filter((f) => /\.rixz?$/.test(f)).sort();
const types = { ".js": "text/javascript", ".html": "text/html", ".json": "application/json" };

let browser;
const server = http.createServer((req, res) => {
  const url = new URL(req.url, "http://127.0.0.1");
  if (req.method === "POST" && url.pathname === "/result") {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      res.end("ok");
      const r = JSON.parse(body);
      if (r.error) { console.error("browser error:", r.error); finish(1); return; }
      console.log(`browser: ${r.ua}`);
      console.log("| frame | bytes | visible | decode ms (median of 21) | min ms | of which inflate ms | checksum |");
      console.log("|---|---:|---:|---:|---:|---:|---:|");
      let bad = 0;
      for (const x of r.rows) {
        if (x.visible !== x.header_visible) bad++;
        console.log(`| ${x.name} | ${x.bytes} | ${x.visible} | ${x.median_ms.toFixed(2)} | ${x.min_ms.toFixed(2)} | ${x.inflate_ms === null ? "-" : x.inflate_ms.toFixed(2)} | ${x.checksum} |`);
      }
      finish(bad ? 1 : 0);
    });
    return;
  }
  let file;
  if (url.pathname === "/frames/index.json") {
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify(frames));
    return;
  } else if (url.pathname.startsWith("/frames/")) {
    file = path.join(dir, path.basename(url.pathname));
  } else if (url.pathname.startsWith("/web/")) {
    file = path.join(web, path.normalize(url.pathname.slice(5)).replace(/^(\.\.[/\\])+/, ""));
  } else if (url.pathname === "/") {
    file = path.join(here, "decode-bench.html");
  }
  if (!file || !fs.existsSync(file)) { res.statusCode = 404; res.end(); return; }
  res.setHeader("content-type", types[path.extname(file)] || "application/octet-stream");
  fs.createReadStream(file).pipe(res);
});

function finish(code) {
  if (browser) browser.kill("SIGKILL");
  server.close();
  clearTimeout(timer);
  process.exitCode = code;
}
const timer = setTimeout(() => { console.error("timeout"); finish(1); }, 120000);

server.listen(0, "127.0.0.1", () => {
  const port = server.address().port;
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), "rixel-bench-"));
  browser = spawn(chromium, [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    `--user-data-dir=${profile}`, `http://127.0.0.1:${port}/`,
  ], { stdio: "ignore" });
});
