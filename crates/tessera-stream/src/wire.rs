//! The byte layout of server messages (documented in `proto/tessera_stream.proto`): a 4-byte
//! little-endian header length, the protobuf [`ServerMessage`] header, zero padding, then the
//! raw arrays at the absolute, 8-byte aligned offsets the header names. A browser views each
//! array as a `Float32Array` over the received `ArrayBuffer` without copying (the cheaper wire
//! format asked for in dissertation §7.1.3, replacing the packed repeated floats of §6.3.3 whose
//! decoding cost 86.5 ms per 1024² field in JavaScript, Table 6.1).
//!
//! Building a frame: [`FrameBuf::new`] reserves room for the largest header the frame can
//! have (offsets are varints, and proto3 omits zero floats, so the header's length depends on
//! the values), the arrays are filled in place ([`FrameBuf::f32_mut`], [`FrameBuf::u16_mut`]),
//! and [`FrameBuf::finish`] writes the real header in front.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use prost::Message;

use crate::pb::{self, server_message::Kind, Encoding, Payload, ServerMessage};
use crate::StreamError;

/// Version of the protocol (`Hello.protocol_version`).
pub const PROTOCOL_VERSION: u32 = 1;
/// Alignment of every array in a server message.
pub const PAYLOAD_ALIGN: usize = 8;
/// Largest client message the server accepts.
pub const MAX_CLIENT_MESSAGE_BYTES: usize = 64 * 1024;
/// Largest server message a client accepts (1 GiB): a bound for decoders, not a server limit.
pub const MAX_SERVER_MESSAGE_BYTES: usize = 1 << 30;

/// Bytes per value of an encoding.
pub fn value_bytes(e: Encoding) -> usize {
    match e {
        Encoding::F32 => 4,
        Encoding::F16 => 2,
    }
}

fn align(n: usize) -> usize {
    n.div_ceil(PAYLOAD_ALIGN) * PAYLOAD_ALIGN
}

/// A server message without arrays, framed (`[H][header]`).
pub fn encode_plain(msg: &ServerMessage) -> Bytes {
    let h = msg.encoded_len();
    let mut v = Vec::with_capacity(4 + h);
    v.extend_from_slice(&(h as u32).to_le_bytes());
    msg.encode(&mut v).expect("a Vec grows as needed");
    Bytes::from(v)
}

/// Storage whose start is 8-byte aligned (a `Vec<u64>` viewed as bytes), so the arrays at
/// 8-byte aligned offsets can be written as `&mut [f32]` without copies. A buffer taken from
/// a [`BufferPool`] goes back to it when the last `Bytes` of its message is dropped.
struct AlignedBytes {
    words: Vec<u64>,
    len: usize,
    pool: Option<Arc<BufferPool>>,
}

impl Drop for AlignedBytes {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.take() {
            pool.give(std::mem::take(&mut self.words));
        }
    }
}

/// Message buffers of sent frames, kept for the next frames of the same size. A fresh
/// multi-megabyte buffer costs its zeroing and a page fault per 4 KiB page on first touch
/// (about as much as copying the field itself); a recycled one is already mapped, so the
/// device-to-host copy and the min/max pass are all that serialization costs. Bounded: at
/// most [`BufferPool::MAX_BUFFERS`] buffers and [`BufferPool::MAX_BYTES`] bytes are kept;
/// frames beyond that (many clients, deep queues) allocate and free as before.
#[derive(Debug, Default)]
pub struct BufferPool {
    free: Mutex<Vec<Vec<u64>>>,
}

impl BufferPool {
    /// Most buffers kept.
    pub const MAX_BUFFERS: usize = 8;
    /// Most bytes kept.
    pub const MAX_BYTES: usize = 256 << 20;

    /// A buffer of `words` words whose contents are unspecified (recycled when one of at
    /// least that capacity is free, else new and zeroed).
    fn take(&self, words: usize) -> Vec<u64> {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        match free.iter().position(|b| b.capacity() >= words) {
            Some(i) => {
                let mut b = free.swap_remove(i);
                drop(free);
                // contents are overwritten or zeroed by FrameBuf::new
                b.resize(words, 0);
                b
            }
            None => {
                drop(free);
                vec![0u64; words]
            }
        }
    }

    fn give(&self, buf: Vec<u64>) {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        let kept: usize = free.iter().map(|b| b.capacity() * 8).sum();
        if free.len() < Self::MAX_BUFFERS && kept + buf.capacity() * 8 <= Self::MAX_BYTES {
            free.push(buf);
        }
    }

    /// Buffers waiting for reuse.
    pub fn num_free(&self) -> usize {
        self.free.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

impl AsRef<[u8]> for AlignedBytes {
    fn as_ref(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.words)[..self.len]
    }
}

/// A server message with arrays under construction (see the module docs).
pub struct FrameBuf {
    buf: AlignedBytes,
    /// (offset, count, encoding) of each array.
    arrays: Vec<(usize, usize, Encoding)>,
}

impl FrameBuf {
    /// Reserves a message for arrays of `(count, encoding)`; `header_len_bound` is an upper
    /// bound of the encoded header (see [`FrameBuf::header_bound`]).
    pub fn new(header_len_bound: usize, arrays: &[(usize, Encoding)]) -> Result<Self, StreamError> {
        Self::new_in(None, header_len_bound, arrays)
    }

    /// [`FrameBuf::new`] with the message buffer taken from (and, once the message is
    /// dropped, returned to) `pool`. Every byte outside the arrays (header room, padding)
    /// starts zeroed; the arrays must be written completely.
    pub fn new_pooled(
        pool: &Arc<BufferPool>,
        header_len_bound: usize,
        arrays: &[(usize, Encoding)],
    ) -> Result<Self, StreamError> {
        Self::new_in(Some(pool), header_len_bound, arrays)
    }

    fn new_in(
        pool: Option<&Arc<BufferPool>>,
        header_len_bound: usize,
        arrays: &[(usize, Encoding)],
    ) -> Result<Self, StreamError> {
        let mut at = align(4 + header_len_bound);
        let mut layout = Vec::with_capacity(arrays.len());
        for &(count, enc) in arrays {
            layout.push((at, count, enc));
            at = count
                .checked_mul(value_bytes(enc))
                .and_then(|b| align(at.checked_add(b)?).into())
                .ok_or_else(|| StreamError::Invalid("frame too large".into()))?;
        }
        if at > u32::MAX as usize {
            return Err(StreamError::Invalid(format!(
                "frame of {at} bytes exceeds the 4 GiB offsets of the protocol"
            )));
        }
        let words = match pool {
            None => vec![0u64; at / 8],
            Some(p) => {
                let mut w = p.take(at / 8);
                // zero what the arrays do not cover: header room and alignment padding
                let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut w);
                let mut from = 0;
                for &(off, count, enc) in &layout {
                    bytes[from..off].fill(0);
                    from = off + count * value_bytes(enc);
                }
                bytes[from..].fill(0);
                w
            }
        };
        Ok(FrameBuf {
            buf: AlignedBytes {
                words,
                len: at,
                pool: pool.cloned(),
            },
            arrays: layout,
        })
    }

    /// An upper bound of the encoded length of `header` once its `Payload` offsets and counts
    /// are filled in and its zero floats become non-zero: encode it with every offset and
    /// count at `u32::MAX` and every min/max at 1.0 (fixed 4 bytes when present).
    pub fn header_bound(mut header: ServerMessage) -> usize {
        if let Some(Kind::Frame(f)) = &mut header.kind {
            if let Some(pb::frame::Kind::Grid(g)) = &mut f.kind {
                for b in &mut g.fields {
                    b.min = 1.0;
                    b.max = 1.0;
                    let p = b.values.get_or_insert_with(Payload::default);
                    p.offset = u32::MAX;
                    p.count = u32::MAX;
                    p.encoding = Encoding::F16 as i32;
                }
            }
        }
        header.encoded_len()
    }

    /// The payload entry of array `i` (for the header).
    pub fn payload(&self, i: usize) -> Payload {
        let (offset, count, enc) = self.arrays[i];
        Payload {
            offset: offset as u32,
            count: count as u32,
            encoding: enc as i32,
        }
    }

    /// Array `i` as f32 values (it must have been reserved as [`Encoding::F32`]).
    pub fn f32_mut(&mut self, i: usize) -> &mut [f32] {
        let (off, count, enc) = self.arrays[i];
        assert_eq!(enc, Encoding::F32, "array {i} is not f32");
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut self.buf.words);
        bytemuck::cast_slice_mut(&mut bytes[off..off + 4 * count])
    }

    /// Array `i` as binary16 bit patterns (reserved as [`Encoding::F16`]).
    pub fn u16_mut(&mut self, i: usize) -> &mut [u16] {
        let (off, count, enc) = self.arrays[i];
        assert_eq!(enc, Encoding::F16, "array {i} is not f16");
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut self.buf.words);
        bytemuck::cast_slice_mut(&mut bytes[off..off + 2 * count])
    }

    /// Writes `header` in front of the arrays and returns the message. Fails if the header is
    /// longer than the bound given to [`FrameBuf::new`].
    pub fn finish(mut self, header: &ServerMessage) -> Result<Bytes, StreamError> {
        let h = header.encoded_len();
        let first = self.arrays.first().map_or(self.buf.len, |a| a.0);
        if 4 + h > first {
            return Err(StreamError::Invalid(format!(
                "frame header of {h} bytes exceeds its reserved {} bytes",
                first - 4
            )));
        }
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut self.buf.words);
        bytes[..4].copy_from_slice(&(h as u32).to_le_bytes());
        let mut dst = &mut bytes[4..4 + h];
        header.encode(&mut dst).expect("room was checked");
        Ok(Bytes::from_owner(self.buf))
    }
}

/// A decoded server message: the header, and the message bytes its arrays point into.
#[derive(Clone, Debug)]
pub struct Received {
    pub header: ServerMessage,
    pub bytes: Bytes,
}

/// Decodes a server message and checks that every array it names lies inside the message
/// after the header, aligned.
pub fn decode_server(bytes: Bytes) -> Result<Received, StreamError> {
    if bytes.len() < 4 {
        return Err(StreamError::Framing(format!(
            "{} bytes: shorter than the 4-byte header length",
            bytes.len()
        )));
    }
    let h = u32::from_le_bytes(bytes[..4].try_into().expect("4 bytes")) as usize;
    if h > bytes.len() - 4 {
        return Err(StreamError::Framing(format!(
            "header length {h} exceeds the {} bytes after it",
            bytes.len() - 4
        )));
    }
    let header = ServerMessage::decode(&bytes[4..4 + h])?;
    if let Some(Kind::Frame(f)) = &header.kind {
        if let Some(pb::frame::Kind::Rixel(r)) = &f.kind {
            let (off, len) = (r.offset as usize, r.length as usize);
            if off % 8 != 0 || off < 4 + h || off.checked_add(len).is_none_or(|e| e > bytes.len()) {
                return Err(StreamError::Framing(format!(
                    "rixel frame at offset {off} of {len} bytes does not lie aligned after the {h}-byte header inside the {}-byte message",
                    bytes.len()
                )));
            }
        }
        for p in payloads(f) {
            let enc = Encoding::try_from(p.encoding).map_err(|_| {
                StreamError::Framing(format!("unknown encoding {} of an array", p.encoding))
            })?;
            let (off, len) = (p.offset as usize, p.count as usize * value_bytes(enc));
            if off % 4 != 0 || off < 4 + h || off.checked_add(len).is_none_or(|e| e > bytes.len()) {
                return Err(StreamError::Framing(format!(
                    "array at offset {off} of {len} bytes does not lie aligned after the {h}-byte header inside the {}-byte message",
                    bytes.len()
                )));
            }
        }
    }
    Ok(Received { header, bytes })
}

/// The payload entries of a frame, in order.
pub fn payloads(f: &pb::Frame) -> Vec<&Payload> {
    match &f.kind {
        Some(pb::frame::Kind::Grid(g)) => {
            g.fields.iter().filter_map(|b| b.values.as_ref()).collect()
        }
        Some(pb::frame::Kind::Rixel(_)) | None => Vec::new(),
    }
}

impl Received {
    /// The values of an array as f32: a borrowed view when the message's storage happens to
    /// be 4-byte aligned in memory and the values are f32, otherwise a converted copy. The
    /// payload was validated by [`decode_server`].
    pub fn values(&self, p: &Payload) -> Cow<'_, [f32]> {
        let off = p.offset as usize;
        let n = p.count as usize;
        match Encoding::try_from(p.encoding).unwrap_or(Encoding::F32) {
            Encoding::F32 => {
                let raw = &self.bytes[off..off + 4 * n];
                match bytemuck::try_cast_slice::<u8, f32>(raw) {
                    Ok(v) => Cow::Borrowed(v),
                    Err(_) => Cow::Owned(
                        raw.chunks_exact(4)
                            .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
                            .collect(),
                    ),
                }
            }
            Encoding::F16 => Cow::Owned(
                self.bytes[off..off + 2 * n]
                    .chunks_exact(2)
                    .map(|c| crate::f16::f16_to_f32(u16::from_le_bytes([c[0], c[1]])))
                    .collect(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb::{FieldBlock, Frame, GridFrame};

    fn frame_header(names: &[&str]) -> ServerMessage {
        ServerMessage {
            kind: Some(Kind::Frame(Frame {
                frame_id: 7,
                time: 0.5,
                subscription: 3,
                kind: Some(pb::frame::Kind::Grid(GridFrame {
                    dims: vec![5, 3, 1],
                    fields: names
                        .iter()
                        .map(|n| FieldBlock {
                            name: n.to_string(),
                            ..Default::default()
                        })
                        .collect(),
                })),
            })),
        }
    }

    /// A recycled buffer gives the same bytes as a fresh one: the arrays hold what was
    /// written, every other byte (header room, padding) is zero, though the buffer last
    /// carried a frame full of other values.
    #[test]
    fn pooled_buffers_are_reused_and_equal_fresh_ones() {
        let pool = Arc::new(BufferPool::default());
        let header = frame_header(&["a", "b"]);
        let bound = FrameBuf::header_bound(header.clone());
        let layout = [(15, Encoding::F32), (13, Encoding::F16)];
        let build = |fb: &mut FrameBuf, k: f32| {
            for (i, v) in fb.f32_mut(0).iter_mut().enumerate() {
                *v = k * i as f32;
            }
            for (i, v) in fb.u16_mut(1).iter_mut().enumerate() {
                *v = crate::f16::f32_to_f16(k + i as f32);
            }
        };
        // a first frame whose every byte is dirty, dropped into the pool
        let mut fb = FrameBuf::new_pooled(&pool, bound, &layout).unwrap();
        let words = fb.buf.words.len();
        fb.buf.words.iter_mut().for_each(|w| *w = u64::MAX);
        drop(fb.finish(&header).unwrap());
        assert_eq!(pool.num_free(), 1);
        let mut reused = FrameBuf::new_pooled(&pool, bound, &layout).unwrap();
        assert_eq!(pool.num_free(), 0, "the free buffer is taken");
        assert_eq!(reused.buf.words.len(), words);
        let mut fresh = FrameBuf::new(bound, &layout).unwrap();
        build(&mut reused, 2.5);
        build(&mut fresh, 2.5);
        let (a, b) = (
            reused.finish(&header).unwrap(),
            fresh.finish(&header).unwrap(),
        );
        assert_eq!(&a[..], &b[..]);
        drop(a);
        assert_eq!(
            pool.num_free(),
            1,
            "back in the pool once the message is dropped"
        );
        // bounded: no more than MAX_BUFFERS are kept
        let many: Vec<FrameBuf> = (0..BufferPool::MAX_BUFFERS + 3)
            .map(|_| FrameBuf::new_pooled(&pool, bound, &layout).unwrap())
            .collect();
        drop(many);
        assert_eq!(pool.num_free(), BufferPool::MAX_BUFFERS);
    }

    #[test]
    fn arrays_are_aligned_and_round_trip() {
        let mut header = frame_header(&["a", "b"]);
        let bound = FrameBuf::header_bound(header.clone());
        let mut fb = FrameBuf::new(bound, &[(15, Encoding::F32), (15, Encoding::F16)]).unwrap();
        for (i, v) in fb.f32_mut(0).iter_mut().enumerate() {
            *v = i as f32 - 3.0;
        }
        for (i, v) in fb.u16_mut(1).iter_mut().enumerate() {
            *v = crate::f16::f32_to_f16(i as f32 * 0.5);
        }
        let (p0, p1) = (fb.payload(0), fb.payload(1));
        assert_eq!(p0.offset % 8, 0);
        assert_eq!(p1.offset % 8, 0);
        assert!(p1.offset >= p0.offset + 60);
        if let Some(Kind::Frame(f)) = &mut header.kind {
            if let Some(pb::frame::Kind::Grid(g)) = &mut f.kind {
                g.fields[0].values = Some(p0);
                g.fields[0].min = -3.0;
                g.fields[0].max = 11.0;
                g.fields[1].values = Some(p1);
            }
        }
        let bytes = fb.finish(&header).unwrap();
        assert_eq!(bytes.as_ptr() as usize % 8, 0, "storage starts aligned");
        let r = decode_server(bytes).unwrap();
        assert_eq!(r.header, header);
        let Some(Kind::Frame(f)) = &r.header.kind else {
            panic!()
        };
        let ps = payloads(f);
        let a = r.values(ps[0]);
        assert!(matches!(a, Cow::Borrowed(_)), "f32 arrays are views");
        assert_eq!(a[0], -3.0);
        assert_eq!(a[14], 11.0);
        assert_eq!(r.values(ps[1])[14], 7.0);
    }

    #[test]
    fn malformed_messages_are_errors() {
        assert!(decode_server(Bytes::from_static(&[1, 0])).is_err());
        assert!(decode_server(Bytes::from_static(&[9, 0, 0, 0, 1])).is_err());
        // a frame whose array points past the end
        let mut header = frame_header(&["a"]);
        if let Some(Kind::Frame(f)) = &mut header.kind {
            if let Some(pb::frame::Kind::Grid(g)) = &mut f.kind {
                g.fields[0].values = Some(Payload {
                    offset: 64,
                    count: 1000,
                    encoding: 0,
                });
            }
        }
        let e = decode_server(encode_plain(&header))
            .unwrap_err()
            .to_string();
        assert!(e.contains("offset 64"), "{e}");
    }
}
