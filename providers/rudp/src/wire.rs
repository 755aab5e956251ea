//! The packets on the wire: a device header (the reliability of the UDP
//! device: connection ids, sequence numbers, acknowledgements) followed,
//! in data packets, by a protocol header (what the engine carries: message
//! segments, rendezvous, emulated RMA and atomics) and the payload.
//! Every field is little-endian; a datagram that is too short, has another
//! magic or version, or names an unknown kind is refused by the parser
//! (and counted by the device), never trusted.

#![forbid(unsafe_code)]

/// First byte of every datagram.
pub const MAGIC: u8 = 0xa7;
/// Wire version; a datagram of another version is dropped.
pub const VERSION: u8 = 1;

pub const DEV_HDR: usize = 32;
pub const PROTO_HDR: usize = 64;
/// Both headers of a data packet.
pub const HDRS: usize = DEV_HDR + PROTO_HDR;

/// What a datagram is, for the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum DevKind {
    /// Carries a protocol packet; sequenced and acknowledged.
    Data = 1,
    /// Acknowledgement only.
    Ack = 2,
    /// First contact: "this is my connection id" (`dst_conn` 0).
    Hello = 3,
    /// Answer to `Hello`: both connection ids.
    HelloAck = 4,
}

impl DevKind {
    fn from_u8(v: u8) -> Option<DevKind> {
        Some(match v {
            1 => DevKind::Data,
            2 => DevKind::Ack,
            3 => DevKind::Hello,
            4 => DevKind::HelloAck,
            _ => return None,
        })
    }
}

/// The device header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DevHdr {
    pub kind: u8,
    pub flags: u8,
    /// The sender's connection id (random per endpoint; never 0).
    pub src_conn: u32,
    /// The receiver's connection id as the sender knows it (0 in `Hello`).
    pub dst_conn: u32,
    /// Sequence number of a `Data` packet.
    pub seq: u32,
    /// Every `Data` sequence below this one arrived (cumulative ack).
    pub ack: u32,
    /// Bit i: sequence `ack + 1 + i` arrived too (selective ack).
    pub sack: u64,
    /// One past the highest sequence that arrived: the sender takes what is
    /// missing below it, in the selective-ack range, as lost.
    pub high: u32,
}

impl DevHdr {
    pub fn encode(&self, out: &mut [u8]) {
        out[0] = MAGIC;
        out[1] = VERSION;
        out[2] = self.kind;
        out[3] = self.flags;
        out[4..8].copy_from_slice(&self.src_conn.to_le_bytes());
        out[8..12].copy_from_slice(&self.dst_conn.to_le_bytes());
        out[12..16].copy_from_slice(&self.seq.to_le_bytes());
        out[16..20].copy_from_slice(&self.ack.to_le_bytes());
        out[20..28].copy_from_slice(&self.sack.to_le_bytes());
        out[28..32].copy_from_slice(&self.high.to_le_bytes());
    }
    /// Parses the device header of a datagram, with its kind.
    pub fn decode(b: &[u8]) -> Option<(DevKind, DevHdr)> {
        if b.len() < DEV_HDR || b[0] != MAGIC || b[1] != VERSION {
            return None;
        }
        let kind = DevKind::from_u8(b[2])?;
        let u = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let sack = u64::from(u(20)) | (u64::from(u(24)) << 32);
        let h = DevHdr { kind: b[2], flags: b[3], src_conn: u(4), dst_conn: u(8), seq: u(12), ack: u(16), sack, high: u(28) };
        if h.src_conn == 0 {
            return None;
        }
        if kind == DevKind::Data && b.len() < HDRS {
            return None;
        }
        Some((kind, h))
    }
}

/// Protocol packet types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Pkt {
    /// A message, whole or one segment of it (eager and medium protocols).
    Msg = 1,
    /// Request to send a long message, with its first bytes.
    Rts = 2,
    /// Clear to send: the receiver matched a long message.
    Cts = 3,
    /// A segment of a long message, for the receive named in the CTS.
    Data = 4,
    /// A message reached its receive buffer (delivery complete).
    Receipt = 5,
    /// Emulated RMA write, one segment.
    Write = 6,
    /// The target of a write has all of it (or refused it).
    WriteResp = 7,
    /// Emulated RMA read request.
    ReadReq = 8,
    /// Read data, one segment (or the refusal).
    ReadResp = 9,
    /// Emulated atomic request.
    Atomic = 10,
    /// Atomic result (or the refusal).
    AtomicResp = 11,
    /// Nothing: a probe, acknowledged like every packet. A peer that some
    /// operation waits on gets one now and then, so that its death shows
    /// as packets unacknowledged even when all it was sent is acknowledged.
    Nop = 12,
}

impl Pkt {
    pub fn from_u8(v: u8) -> Option<Pkt> {
        Some(match v {
            1 => Pkt::Msg,
            2 => Pkt::Rts,
            3 => Pkt::Cts,
            4 => Pkt::Data,
            5 => Pkt::Receipt,
            6 => Pkt::Write,
            7 => Pkt::WriteResp,
            8 => Pkt::ReadReq,
            9 => Pkt::ReadResp,
            10 => Pkt::Atomic,
            11 => Pkt::AtomicResp,
            12 => Pkt::Nop,
            _ => return None,
        })
    }
}

/// Protocol header flags.
pub const F_TAGGED: u8 = 1;
pub const F_CQ_DATA: u8 = 2;
/// The sender waits for a `Receipt` (`FI_DELIVERY_COMPLETE`).
pub const F_RECEIPT: u8 = 4;

/// The protocol header. Fields mean what the packet type says:
/// - `Msg`/`Rts`: `msg_id` (per-peer order), `op_id` (sender's operation),
///   `tag`, `data` (CQ data), `total` (message length), `offset` of the payload;
/// - `Cts`: `op_id` (sender's), `aux` (receiver's receive id), `total` (granted);
/// - `Data`: `aux` (receiver's receive id), `offset`;
/// - `Receipt`: `op_id` (sender's);
/// - `Write`: `op_id`, `tag` (key), `addr`, `total`, `offset`, `data`;
/// - `ReadReq`: `op_id`, `tag` (key), `addr`, `total`;
/// - `ReadResp`/`WriteResp`/`AtomicResp`: `op_id`, `aux` (0 or a positive
///   `FI_E*` code), `offset`;
/// - `Atomic`: `msg_id`, `op_id`, `tag` (key), `addr`, `total` (count),
///   `aop` / `dtype` / `akind`; payload: operands, then compare operands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProtoHdr {
    pub pkt: u8,
    pub flags: u8,
    pub aop: u8,
    pub dtype: u8,
    pub msg_id: u32,
    pub op_id: u32,
    pub aux: u32,
    pub akind: u32,
    pub tag: u64,
    pub data: u64,
    pub total: u64,
    pub offset: u64,
    pub addr: u64,
}

impl ProtoHdr {
    /// Into a header-sized array: fixed offsets, no bounds checks on the
    /// data path.
    pub fn encode(&self, out: &mut [u8; PROTO_HDR]) {
        out[0] = self.pkt;
        out[1] = self.flags;
        out[2] = self.aop;
        out[3] = self.dtype;
        out[4..8].copy_from_slice(&self.akind.to_le_bytes());
        out[8..12].copy_from_slice(&self.msg_id.to_le_bytes());
        out[12..16].copy_from_slice(&self.op_id.to_le_bytes());
        out[16..20].copy_from_slice(&self.aux.to_le_bytes());
        out[20..24].copy_from_slice(&[0; 4]);
        out[24..32].copy_from_slice(&self.tag.to_le_bytes());
        out[32..40].copy_from_slice(&self.data.to_le_bytes());
        out[40..48].copy_from_slice(&self.total.to_le_bytes());
        out[48..56].copy_from_slice(&self.offset.to_le_bytes());
        out[56..64].copy_from_slice(&self.addr.to_le_bytes());
    }
    pub fn decode(b: &[u8]) -> Option<(Pkt, ProtoHdr)> {
        let b: &[u8; PROTO_HDR] = b.first_chunk()?;
        let pkt = Pkt::from_u8(b[0])?;
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| u64::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3], b[i + 4], b[i + 5], b[i + 6], b[i + 7]]);
        Some((
            pkt,
            ProtoHdr {
                pkt: b[0],
                flags: b[1],
                aop: b[2],
                dtype: b[3],
                akind: u32_at(4),
                msg_id: u32_at(8),
                op_id: u32_at(12),
                aux: u32_at(16),
                tag: u64_at(24),
                data: u64_at(32),
                total: u64_at(40),
                offset: u64_at(48),
                addr: u64_at(56),
            },
        ))
    }
}
