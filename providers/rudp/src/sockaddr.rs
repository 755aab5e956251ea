//! Addresses as `struct sockaddr_in` / `sockaddr_in6` bytes (what
//! `fi_getname` returns and `fi_av_insert` takes under `FI_SOCKADDR_IN` /
//! `FI_SOCKADDR_IN6`) and `std::net::SocketAddr`.

#![forbid(unsafe_code)]

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

pub const SIN_LEN: usize = 16;
pub const SIN6_LEN: usize = 28;
const AF_INET: u16 = libc::AF_INET as u16;
const AF_INET6: u16 = libc::AF_INET6 as u16;

/// `to_bytes` into a buffer on the stack: the bytes are `buf[..n]`.
pub fn to_array(a: &SocketAddr) -> ([u8; SIN6_LEN], usize) {
    let mut buf = [0u8; SIN6_LEN];
    match a {
        SocketAddr::V4(v) => {
            buf[0..2].copy_from_slice(&AF_INET.to_ne_bytes());
            buf[2..4].copy_from_slice(&v.port().to_be_bytes());
            buf[4..8].copy_from_slice(&v.ip().octets());
            (buf, SIN_LEN)
        }
        SocketAddr::V6(v) => {
            buf[0..2].copy_from_slice(&AF_INET6.to_ne_bytes());
            buf[2..4].copy_from_slice(&v.port().to_be_bytes());
            buf[4..8].copy_from_slice(&v.flowinfo().to_be_bytes());
            buf[8..24].copy_from_slice(&v.ip().octets());
            buf[24..28].copy_from_slice(&v.scope_id().to_ne_bytes());
            (buf, SIN6_LEN)
        }
    }
}

pub fn to_bytes(a: &SocketAddr) -> Vec<u8> {
    match a {
        SocketAddr::V4(v) => {
            let mut b = vec![0u8; SIN_LEN];
            b[0..2].copy_from_slice(&AF_INET.to_ne_bytes());
            b[2..4].copy_from_slice(&v.port().to_be_bytes());
            b[4..8].copy_from_slice(&v.ip().octets());
            b
        }
        SocketAddr::V6(v) => {
            let mut b = vec![0u8; SIN6_LEN];
            b[0..2].copy_from_slice(&AF_INET6.to_ne_bytes());
            b[2..4].copy_from_slice(&v.port().to_be_bytes());
            b[4..8].copy_from_slice(&v.flowinfo().to_be_bytes());
            b[8..24].copy_from_slice(&v.ip().octets());
            b[24..28].copy_from_slice(&v.scope_id().to_ne_bytes());
            b
        }
    }
}

/// Parses a `sockaddr_in` or `sockaddr_in6`; `None` for anything else
/// (another family, a short buffer, port 0, an unspecified address).
pub fn from_bytes(b: &[u8]) -> Option<SocketAddr> {
    if b.len() < 2 {
        return None;
    }
    let fam = u16::from_ne_bytes([b[0], b[1]]);
    let a = if fam == AF_INET && b.len() >= SIN_LEN {
        let port = u16::from_be_bytes([b[2], b[3]]);
        SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(b[4], b[5], b[6], b[7]), port))
    } else if fam == AF_INET6 && b.len() >= SIN6_LEN {
        let port = u16::from_be_bytes([b[2], b[3]]);
        let flow = u32::from_be_bytes([b[4], b[5], b[6], b[7]]);
        let ip: [u8; 16] = b[8..24].try_into().ok()?;
        let scope = u32::from_ne_bytes([b[24], b[25], b[26], b[27]]);
        SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::from(ip), port, flow, scope))
    } else {
        return None;
    };
    if a.port() == 0 || a.ip().is_unspecified() {
        return None;
    }
    Some(a)
}

/// Parses an address to bind to: port 0 (any port) is allowed.
pub fn from_bytes_any(b: &[u8]) -> Option<SocketAddr> {
    let mut v = b.to_vec();
    if v.len() < 4 {
        return None;
    }
    let port = u16::from_be_bytes([v[2], v[3]]);
    v[2..4].copy_from_slice(&1u16.to_be_bytes());
    let mut a = from_bytes(&v)?;
    a.set_port(port);
    Some(a)
}

/// `fi_av_straddr`'s form: `fi_sockaddr_in://1.2.3.4:5` / `fi_sockaddr_in6://[::1]:5`.
pub fn to_string(b: &[u8]) -> String {
    match from_bytes(b) {
        Some(SocketAddr::V4(v)) => format!("fi_sockaddr_in://{v}"),
        Some(SocketAddr::V6(v)) => format!("fi_sockaddr_in6://{v}"),
        None => "fi_addr_unknown://".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refusals() {
        for s in ["10.1.2.3:4567", "[fd77::2]:9", "127.0.0.1:65535"] {
            let a: SocketAddr = s.parse().unwrap();
            let b = to_bytes(&a);
            assert_eq!(from_bytes(&b), Some(a));
        }
        assert_eq!(from_bytes(&to_bytes(&"1.2.3.4:0".parse().unwrap())), None);
        assert_eq!(from_bytes(&to_bytes(&"0.0.0.0:5".parse().unwrap())), None);
        assert_eq!(from_bytes(&[0u8; 16]), None);
        assert_eq!(from_bytes(&to_bytes(&"1.2.3.4:5".parse().unwrap())[..15]), None);
        assert_eq!(to_string(&to_bytes(&"1.2.3.4:5".parse().unwrap())), "fi_sockaddr_in://1.2.3.4:5");
    }
}

#[cfg(test)]
mod to_array_tests {
    #[test]
    fn to_array_matches_to_bytes() {
        for a in ["127.0.0.1:5000", "[::1]:7000", "[fe80::1%2]:9"] {
            let Ok(a) = a.parse::<std::net::SocketAddr>() else { continue };
            let (b, n) = super::to_array(&a);
            assert_eq!(&b[..n], &super::to_bytes(&a)[..], "{a}");
        }
    }
}
