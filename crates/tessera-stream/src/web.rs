//! The browser client (dissertation §6.3.1): plain ES modules and WebGL2 in `web/`, embedded
//! in the binary so `tessera serve` needs no other files (no build step).
//!
//! | file | what it is |
//! |---|---|
//! | `index.html`, `style.css` | the page: view, color ramp, field selector, expression box, status line |
//! | `protocol.js` | protobuf decoding of the header, zero-copy `Float32Array` views of the payload, request encoding |
//! | `connection.js` | the WebSocket, subscriptions and frame-request flow control (N outstanding) |
//! | `colormap.js` | presets (viridis, coolwarm, grayscale), the draggable ramp widget, the 256-texel ramp |
//! | `view2d.js` | the 2D view: the field as an R32F (or R16F) texture colored in a fragment shader, zoom, pan, probe |
//! | `app.js` | wires them together; views register in one list so a further view (3D) can be added |

/// The embedded files: (name, MIME type, contents).
pub const ASSETS: &[(&str, &str, &[u8])] = &[
    (
        "index.html",
        "text/html; charset=utf-8",
        include_bytes!("../web/index.html"),
    ),
    (
        "style.css",
        "text/css; charset=utf-8",
        include_bytes!("../web/style.css"),
    ),
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../web/app.js"),
    ),
    (
        "protocol.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../web/protocol.js"),
    ),
    (
        "connection.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../web/connection.js"),
    ),
    (
        "colormap.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../web/colormap.js"),
    ),
    (
        "view2d.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../web/view2d.js"),
    ),
    // the 3D view (dissertation §6.3.5): rixel decoder and WebGL2 splat renderer, kept beside
    // the renderer and its decode benchmark
    (
        "rixel.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../tessera-render/web/rixel.js"),
    ),
    (
        "view3d.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../tessera-render/web/view3d.js"),
    ),
];

/// The MIME type and embedded bytes of a web file, if it is one.
pub fn asset(name: &str) -> Option<(&'static str, &'static [u8])> {
    ASSETS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, m, b)| (*m, *b))
}
