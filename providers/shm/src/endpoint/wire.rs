//! The wire format of the transport: the op codes, the header words of
//! a ring entry ([`Wire`], stored and loaded as one line), the provider
//! flags of eager entries (`PF_NO_TAG`, `PF_NO_DATA`) that make tiny
//! messages one cache line, where a payload starts in its cell, and the
//! modes of an `RTS`.

use crate::ring::CELL_HDR;

pub const OP_EAGER: u8 = 1;
pub const OP_RTS: u8 = 2;
pub const OP_FIN: u8 = 3;
pub const OP_NACK: u8 = 4;
pub const OP_BOUNCE: u8 = 5;
/// Marks a continuation cell of a multi-cell eager message.
pub const OP_CONT: u8 = 6;
/// Receiver to sender of a CMA rendezvous: "copy chunks of it too" (shared
/// copy; see `start_shared`).
pub const OP_HELP: u8 = 7;

/// Eager entries leave out header words that are zero: `PF_NO_TAG` (tag
/// 0) and `PF_NO_DATA` (immediate data 0) in the entry's provider flags.
/// A tiny payload starts right after the words that are there (sequence,
/// op/flags/length, sender key, then tag and data if present), so the
/// whole message is one cache line: up to 40 bytes for an untagged
/// message without data, 24 with both.
pub const PF_NO_TAG: u8 = 2;
pub const PF_NO_DATA: u8 = 4;
/// Largest tiny payload (no tag, no data); larger ones start at
/// [`CELL_HDR`] (64-byte aligned, whole lines for the copy).
pub const TINY_MAX: usize = 64 - 24;

/// Offset of a tiny payload in an eager entry with provider flags `pflags`.
#[inline]
fn tiny_off(pflags: u8) -> usize {
    24 + if pflags & PF_NO_TAG == 0 { 8 } else { 0 } + if pflags & PF_NO_DATA == 0 { 8 } else { 0 }
}

/// Largest tiny payload for an eager entry with provider flags `pflags`.
pub fn tiny_max(pflags: u8) -> usize {
    64 - tiny_off(pflags)
}

/// Offset of the payload in a continuation cell (after sequence word and
/// marker, padded to the line).
pub const CONT_OFF: usize = 64;

/// Where the payload of an eager message of `len` bytes with provider
/// flags `pflags` starts in its first cell.
#[inline]
pub fn payload_off(len: u64, pflags: u8) -> usize {
    let t = tiny_off(pflags);
    if len <= (64 - t) as u64 {
        t
    } else {
        CELL_HDR
    }
}

pub(super) const MODE_CMA: u8 = 1;
pub(super) const MODE_BOUNCE: u8 = 2;
pub(super) const PF_ERR: u8 = 1;

/// Fields the layer above chooses for each message.
///
/// `flags` sits between the two words (`repr(C)`), so that a header filled
/// from an operation the caller has just built copies them one at a time:
/// one 16-byte copy of both would wait for the caller's two 8-byte stores
/// to retire.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct MsgHeader {
    pub tag: u64,
    /// Opaque flags for the layer above (tagged, remote CQ data, ...).
    pub flags: u8,
    pub cq_data: u64,
}

/// The header words as they sit in a cell (bytes 8..64).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wire {
    pub op: u8,
    pub uflags: u8,
    pub pflags: u8,
    pub aux: u32,
    pub src_key: u64,
    pub tag: u64,
    pub cq_data: u64,
    pub len: u64,
    pub msg_id: u64,
    pub addr: u64,
}

impl Wire {
    /// For eager entries the length travels in `aux` and the words after
    /// the immediate data hold payload; out-of-range lengths saturate, so
    /// the receiver rejects them.
    fn eager_w0(&self) -> u64 {
        let len = self.len.min(u32::MAX as u64);
        self.op as u64 | (self.uflags as u64) << 8 | (self.pflags as u64) << 16 | len << 32
    }
    fn words(&self) -> [u64; 7] {
        let w0 = self.op as u64 | (self.uflags as u64) << 8 | (self.pflags as u64) << 16 | (self.aux as u64) << 32;
        [w0, self.src_key, self.tag, self.cq_data, self.len, self.msg_id, self.addr]
    }
    fn from_words(w: [u64; 7]) -> Wire {
        Wire {
            op: w[0] as u8,
            uflags: (w[0] >> 8) as u8,
            pflags: (w[0] >> 16) as u8,
            aux: (w[0] >> 32) as u32,
            src_key: w[1],
            tag: w[2],
            cq_data: w[3],
            len: w[4],
            msg_id: w[5],
            addr: w[6],
        }
    }
    /// # Safety
    /// `cell` must be a reserved cell of at least 64 bytes.
    #[inline]
    pub unsafe fn store(&self, cell: *mut u8) {
        let p = cell.wrapping_add(8).cast::<u64>();
        if self.op == OP_EAGER {
            // With PF_NO_TAG the data word moves up into the tag's place.
            // A tiny payload may start inside these four words: callers
            // store the header first and copy such a payload after it.
            let w2 = if self.pflags & PF_NO_TAG != 0 { self.cq_data } else { self.tag };
            // SAFETY: words 1..5 of the cell's first line, 8-aligned.
            unsafe {
                std::ptr::write_volatile(p, self.eager_w0());
                std::ptr::write_volatile(p.add(1), self.src_key);
                std::ptr::write_volatile(p.add(2), w2);
                std::ptr::write_volatile(p.add(3), self.cq_data);
            }
            return;
        }
        let w = self.words();
        // SAFETY: words 1..8 of the cell's first line, 8-aligned.
        unsafe {
            for (i, v) in w.into_iter().enumerate() {
                std::ptr::write_volatile(p.add(i), v);
            }
        }
    }
    /// # Safety
    /// `cell` must be a published cell of at least 64 bytes.
    #[inline]
    pub unsafe fn load(cell: *const u8) -> Wire {
        let p = cell.wrapping_add(8).cast::<u64>();
        // SAFETY: words 1..5 of the cell's first line, 8-aligned; every
        // entry has at least these.
        let (w0, w1, w2, w3) = unsafe {
            (std::ptr::read_volatile(p), std::ptr::read_volatile(p.add(1)), std::ptr::read_volatile(p.add(2)), std::ptr::read_volatile(p.add(3)))
        };
        if w0 as u8 == OP_EAGER {
            let pf = (w0 >> 16) as u8;
            let no_tag = pf & PF_NO_TAG != 0;
            let tag = if no_tag { 0 } else { w2 };
            let data = if pf & PF_NO_DATA != 0 {
                0
            } else if no_tag {
                w2
            } else {
                w3
            };
            let mut wire = Wire::from_words([w0, w1, tag, data, 0, 0, 0]);
            wire.len = w0 >> 32;
            wire.aux = 0;
            return wire;
        }
        // SAFETY: words 5..8 of the same line.
        let (w4, w5, w6) = unsafe { (std::ptr::read_volatile(p.add(4)), std::ptr::read_volatile(p.add(5)), std::ptr::read_volatile(p.add(6))) };
        Wire::from_words([w0, w1, w2, w3, w4, w5, w6])
    }
}
