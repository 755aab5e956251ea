//! The addresses a port is reached by, and their `fi_info` encodings:
//! `FI_SOCKADDR_IN` / `FI_SOCKADDR_IN6` (RoCE GIDs that hold an IP address,
//! IPoIB interface addresses) and `FI_SOCKADDR_IB` (`struct sockaddr_ib`
//! of `<rdma/rdma_cm.h>`'s `<infiniband/ib.h>`, from an InfiniBand GID).
#![forbid(unsafe_code)]

use rfabric_core::abi::{FI_SOCKADDR_IB, FI_SOCKADDR_IN, FI_SOCKADDR_IN6};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// `AF_IB` (`<infiniband/ib.h>`; glibc has no name for it).
pub const AF_IB: u16 = 27;
/// `sizeof(struct sockaddr_ib)`.
pub const SOCKADDR_IB_LEN: usize = 48;
/// The default (full-membership) partition key.
pub const DEFAULT_PKEY: u16 = 0xffff;

/// One address of a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Addr {
    Ip(IpAddr),
    /// An InfiniBand GID and partition key.
    Ib { gid: [u8; 16], pkey: u16 },
}

impl Addr {
    /// `FI_SOCKADDR_IN`, `FI_SOCKADDR_IN6` or `FI_SOCKADDR_IB`.
    pub fn format(&self) -> u32 {
        match self {
            Addr::Ip(IpAddr::V4(_)) => FI_SOCKADDR_IN,
            Addr::Ip(IpAddr::V6(_)) => FI_SOCKADDR_IN6,
            Addr::Ib { .. } => FI_SOCKADDR_IB,
        }
    }

    /// The `struct sockaddr_*` bytes `fi_info.src_addr` carries (port 0).
    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            Addr::Ip(IpAddr::V4(ip)) => {
                // struct sockaddr_in: family, port (big-endian), address, zero.
                let mut b = vec![0u8; 16];
                b[0..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
                b[4..8].copy_from_slice(&ip.octets());
                b
            }
            Addr::Ip(IpAddr::V6(ip)) => {
                // struct sockaddr_in6: family, port, flowinfo, address, scope.
                let mut b = vec![0u8; 28];
                b[0..2].copy_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
                b[8..24].copy_from_slice(&ip.octets());
                b
            }
            Addr::Ib { gid, pkey } => sockaddr_ib(gid, *pkey, 0),
        }
    }
}

/// `struct sockaddr_ib`: `sib_family`, `sib_pkey` (big-endian),
/// `sib_flowinfo`, `sib_addr` (the GID), `sib_sid` (big-endian),
/// `sib_sid_mask`, `sib_scope_id`.
pub fn sockaddr_ib(gid: &[u8; 16], pkey: u16, sid: u64) -> Vec<u8> {
    let mut b = vec![0u8; SOCKADDR_IB_LEN];
    b[0..2].copy_from_slice(&AF_IB.to_ne_bytes());
    b[2..4].copy_from_slice(&pkey.to_be_bytes());
    b[8..24].copy_from_slice(gid);
    b[24..32].copy_from_slice(&sid.to_be_bytes());
    if sid != 0 {
        b[32..40].copy_from_slice(&u64::MAX.to_be_bytes());
    }
    b
}

/// The IP address a RoCE GID holds: IPv4-mapped (`::ffff:a.b.c.d`, RoCE
/// v2 over IPv4) or an IPv6 address that is not link-local (a link-local
/// one needs the interface's scope, and every RoCE port also has one made
/// from its MAC address). `None` for an unused (all-zero) entry and the
/// others.
pub fn gid_ip(gid: &[u8; 16]) -> Option<IpAddr> {
    if gid.iter().all(|&b| b == 0) {
        return None;
    }
    let v6 = Ipv6Addr::from(*gid);
    if let Some(v4) = v6.to_ipv4_mapped() {
        return Some(IpAddr::V4(v4));
    }
    let s = v6.segments();
    if s[0] & 0xffc0 == 0xfe80 || v6.is_loopback() || v6.is_multicast() {
        return None;
    }
    Some(IpAddr::V6(v6))
}

/// The GID an IPoIB interface's link address ends with: its hardware
/// address is 20 bytes, a queue pair number and flags, then the port GID
/// (`/sys/class/net/<if>/address`, `aa:bb:...`).
pub fn ipoib_gid(hwaddr: &str) -> Option<[u8; 16]> {
    let bytes: Vec<u8> = hwaddr.trim().split(':').map(|h| u8::from_str_radix(h, 16)).collect::<Result<_, _>>().ok()?;
    if bytes.len() != 20 {
        return None;
    }
    bytes[4..].try_into().ok()
}

/// The IP addresses of the IPoIB interfaces over the port whose GID is
/// `gid`: `/sys/class/net/*` of type 32 (`ARPHRD_INFINIBAND`) whose link
/// address ends with it, and their addresses from the interface list.
pub fn ipoib_addrs(gid: &[u8; 16]) -> Vec<IpAddr> {
    let Ok(dir) = std::fs::read_dir("/sys/class/net") else { return Vec::new() };
    let mut names = Vec::new();
    for e in dir.flatten() {
        let p = e.path();
        let is_ib = std::fs::read_to_string(p.join("type")).is_ok_and(|t| t.trim() == "32");
        if is_ib && std::fs::read_to_string(p.join("address")).ok().and_then(|a| ipoib_gid(&a)).as_ref() == Some(gid) {
            names.push(e.file_name().to_string_lossy().into_owned());
        }
    }
    if names.is_empty() {
        return Vec::new();
    }
    rfabric_core::net::interfaces().into_iter().filter(|i| names.contains(&i.name)).map(|i| i.addr).collect()
}

/// `a.b.c.d` as the IPv4-mapped GID a RoCE v2 port lists for it.
pub fn v4_gid(ip: Ipv4Addr) -> [u8; 16] {
    ip.to_ipv6_mapped().octets()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gids_that_hold_ip_addresses() {
        assert_eq!(gid_ip(&v4_gid(Ipv4Addr::new(10, 0, 0, 5))), Some("10.0.0.5".parse().unwrap()));
        assert_eq!(gid_ip(&"2001:db8::5".parse::<Ipv6Addr>().unwrap().octets()), Some("2001:db8::5".parse().unwrap()));
        assert_eq!(gid_ip(&"fe80::1:2ff:fe03:405".parse::<Ipv6Addr>().unwrap().octets()), None);
        assert_eq!(gid_ip(&[0; 16]), None);
    }

    #[test]
    fn encodings() {
        let v4 = Addr::Ip("10.1.2.3".parse().unwrap()).to_bytes();
        assert_eq!((v4.len(), &v4[4..8]), (16, &[10, 1, 2, 3][..]));
        assert_eq!(u16::from_ne_bytes([v4[0], v4[1]]), libc::AF_INET as u16);
        let v6 = Addr::Ip("2001:db8::1".parse().unwrap()).to_bytes();
        assert_eq!(v6.len(), std::mem::size_of::<libc::sockaddr_in6>());
        let gid = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8];
        let ib = Addr::Ib { gid, pkey: DEFAULT_PKEY };
        assert_eq!(ib.format(), FI_SOCKADDR_IB);
        let b = ib.to_bytes();
        assert_eq!(b.len(), SOCKADDR_IB_LEN);
        assert_eq!(u16::from_ne_bytes([b[0], b[1]]), AF_IB);
        assert_eq!(&b[2..4], &[0xff, 0xff]);
        assert_eq!(&b[8..24], &gid);
    }

    #[test]
    fn ipoib_link_addresses() {
        let a = "00:00:10:49:fe:80:00:00:00:00:00:00:0c:42:a1:03:00:5e:1a:2b";
        assert_eq!(ipoib_gid(a), Some([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x0c, 0x42, 0xa1, 0x03, 0, 0x5e, 0x1a, 0x2b]));
        assert_eq!(ipoib_gid("52:54:00:12:34:56"), None);
    }
}
