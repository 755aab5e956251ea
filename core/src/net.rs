//! The machine's network interfaces (`getifaddrs`), for providers that
//! offer one domain per interface address (rudp) or match RDMA ports to
//! their network devices (verbs).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// One address of an interface that is up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IfAddr {
    pub name: String,
    pub addr: IpAddr,
    pub loopback: bool,
    /// The interface's MTU (`/sys/class/net/<name>/mtu`), if readable.
    pub mtu: Option<usize>,
}

/// The addresses of the interfaces that are up, in the kernel's order
/// (IPv6 link-local addresses left out: they need a scope to be reached).
pub fn interfaces() -> Vec<IfAddr> {
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list head into `head`, freed below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return out;
    }
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, live
        // until freeifaddrs.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        let up = ifa.ifa_flags & libc::IFF_UP as u32 != 0;
        if !up || ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: ifa_name is a NUL-terminated string of the node.
        let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }.to_string_lossy().into_owned();
        // SAFETY: ifa_addr is non-null and starts with sa_family.
        let fam = unsafe { (*ifa.ifa_addr).sa_family } as i32;
        let addr = match fam {
            libc::AF_INET => {
                // SAFETY: an AF_INET address is a sockaddr_in.
                let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                IpAddr::V4(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)))
            }
            libc::AF_INET6 => {
                // SAFETY: an AF_INET6 address is a sockaddr_in6.
                let sin6 = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
                let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
                if ip.segments()[0] & 0xffc0 == 0xfe80 {
                    continue;
                }
                IpAddr::V6(ip)
            }
            _ => continue,
        };
        let mtu = std::fs::read_to_string(format!("/sys/class/net/{name}/mtu")).ok().and_then(|s| s.trim().parse().ok());
        out.push(IfAddr { loopback: ifa.ifa_flags & libc::IFF_LOOPBACK as u32 != 0, name, addr, mtu });
    }
    // SAFETY: `head` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    out
}

