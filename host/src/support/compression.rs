//! What a payload is sealed as: a kind byte, then the body as is or compressed (zstd when
//! that makes it smaller; lz4, sealed before zstd, still opened). Every size is bounded before
//! anything is allocated.

use std::cell::RefCell;

/// What the sealed plaintext starts with: the body as is, lz4 with its size in front (bodies
/// sealed before zstd; still opened), or one zstd frame that states its size.
pub(super) const RAW: u8 = 0;
pub(super) const LZ4: u8 = 1;
pub(super) const ZSTD: u8 = 2;
/// zstd's fastest regular level: on the benchmark's JSON bodies it stores 1.45 times less than
/// lz4 (ratio 4.1 against 2.85) at about 290 MB/s, a few tens of microseconds for a 10 KiB
/// body. Higher levels gain little on bodies this small.
const ZSTD_LEVEL: i32 = 1;
/// No body is larger (the largest body limit there is); a sealed size claiming more is
/// refused before anything is allocated.
pub(super) const MAX_OPENED_BYTES: usize = 64 << 20;

thread_local! {
    // A compression context holds about a megabyte of tables: one per thread, reused, rather
    // than one made and freed for every body.
    static COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> = const { RefCell::new(None) };
    static DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
}

/// The plaintext to seal: the kind byte, then the body compressed if that made it smaller.
pub(super) fn compress(body: &[u8]) -> Vec<u8> {
    let compressed = COMPRESSOR.with_borrow_mut(|slot| {
        if slot.is_none() {
            *slot = zstd::bulk::Compressor::new(ZSTD_LEVEL).ok();
        }
        slot.as_mut()?.compress(body).ok()
    });
    let mut plain = Vec::new();
    match compressed {
        Some(frame) if frame.len() < body.len() => {
            plain.reserve_exact(1 + frame.len());
            plain.push(ZSTD);
            plain.extend_from_slice(&frame);
        }
        _ => {
            plain.reserve_exact(1 + body.len());
            plain.push(RAW);
            plain.extend_from_slice(body);
        }
    }
    plain
}

/// One zstd frame back to the body. The frame states its size, which must be there and within
/// bounds before anything is allocated, and the output must be exactly that size.
fn decompress_zstd(frame: &[u8]) -> Option<Vec<u8>> {
    let size = zstd::zstd_safe::get_frame_content_size(frame).ok()??;
    let size = usize::try_from(size)
        .ok()
        .filter(|&s| s <= MAX_OPENED_BYTES)?;
    let body = DECOMPRESSOR.with_borrow_mut(|slot| {
        if slot.is_none() {
            *slot = zstd::bulk::Decompressor::new().ok();
        }
        slot.as_mut()?.decompress(frame, size).ok()
    })?;
    (body.len() == size).then_some(body)
}

/// A sealed plaintext back to the body; `None`: not one this module wrote.
pub(super) fn decompress(plain: &[u8]) -> Option<Vec<u8>> {
    let (&kind, data) = plain.split_first()?;
    match kind {
        RAW => Some(data.to_vec()),
        LZ4 => {
            let size = data
                .get(..4)
                .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize)?;
            if size > MAX_OPENED_BYTES {
                return None;
            }
            lz4_flex::block::decompress_size_prepended(data).ok()
        }
        ZSTD => decompress_zstd(data),
        _ => None,
    }
}
