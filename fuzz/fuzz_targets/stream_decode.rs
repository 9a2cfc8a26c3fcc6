//! cargo-fuzz target for the streaming protocol's decoders: any bytes given to the client-side
//! server-message decoder, or to the server's ClientMessage decoder, give a value or an error,
//! never a panic; a decoded frame's arrays lie inside the message and can be read.
#![no_main]

use libfuzzer_sys::fuzz_target;
use prost::Message;
use tessera_stream::pb::{server_message::Kind, ClientMessage};
use tessera_stream::wire::{decode_server, payloads};

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = decode_server(bytes::Bytes::copy_from_slice(data)) {
        if let Some(Kind::Frame(f)) = &r.header.kind {
            for p in payloads(f) {
                let _ = r.values(p).len();
            }
        }
    }
    let _ = ClientMessage::decode(data);
});
