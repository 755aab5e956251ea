//! The few libfabric constants the object machinery needs, with the values of
//! the C headers (checked against `tests/abi/constants.tsv` in the tests
//! below). Kept private to `objects` until `crate::abi` carries them all.
#![allow(dead_code)]

pub const FI_READ: u64 = 1 << 8;
pub const FI_WRITE: u64 = 1 << 9;
pub const FI_RECV: u64 = 1 << 10;
pub const FI_SEND: u64 = 1 << 11;
pub const FI_REMOTE_READ: u64 = 1 << 12;
pub const FI_REMOTE_WRITE: u64 = 1 << 13;
pub const FI_MULTI_RECV: u64 = 1 << 16;
pub const FI_REMOTE_CQ_DATA: u64 = 1 << 17;
pub const FI_PEEK: u64 = 1 << 19;
pub const FI_DISCARD: u64 = 1 << 58;
pub const FI_CLAIM: u64 = 1 << 59;
pub const FI_AV_USER_ID: u64 = 1 << 41;
pub const FI_MORE: u64 = 1 << 18;
pub const FI_MR_VIRT_ADDR: u64 = 1 << 4;
pub const FI_MR_PROV_KEY: u64 = 1 << 6;
pub const FI_SYNC_ERR: u64 = 1 << 58;
pub const FI_FIREWALL_ADDR: u64 = 1 << 42;

pub const FI_EAGAIN: i32 = 11;
pub const FI_EAVAIL: i32 = 259;
pub const FI_ENOKEY: i32 = 266;
pub const FI_EKEYREJECTED: i32 = 129;
pub const FI_ECANCELED: i32 = 125;
pub const FI_EOVERFLOW: i32 = 75;
pub const FI_ETIMEDOUT: i32 = 110;
pub const FI_ETOOSMALL: i32 = 257;
pub const FI_EACCES: i32 = 13;
pub const FI_ENOSPC: i32 = 28;
pub const FI_ENOMSG: i32 = 42;
pub const FI_EADDRNOTAVAIL: i32 = 99;
pub const FI_EBADFLAGS: i32 = 260;

pub const FI_CQ_FORMAT_UNSPEC: u32 = 0;
pub const FI_CQ_FORMAT_CONTEXT: u32 = 1;
pub const FI_CQ_FORMAT_MSG: u32 = 2;
pub const FI_CQ_FORMAT_DATA: u32 = 3;
pub const FI_CQ_FORMAT_TAGGED: u32 = 4;

pub const FI_WAIT_NONE: u32 = 0;
pub const FI_WAIT_UNSPEC: u32 = 1;
pub const FI_WAIT_SET: u32 = 2;
pub const FI_WAIT_FD: u32 = 3;
pub const FI_WAIT_MUTEX_COND: u32 = 4;
pub const FI_WAIT_YIELD: u32 = 5;
pub const FI_WAIT_POLLFD: u32 = 6;

pub const FI_AV_UNSPEC: u32 = 0;
pub const FI_AV_MAP: u32 = 1;
pub const FI_AV_TABLE: u32 = 2;

pub const FI_NOTIFY: u32 = 0;
pub const FI_CONNREQ: u32 = 1;
pub const FI_CONNECTED: u32 = 2;
pub const FI_SHUTDOWN: u32 = 3;
pub const FI_MR_COMPLETE: u32 = 4;
pub const FI_AV_COMPLETE: u32 = 5;
pub const FI_JOIN_COMPLETE: u32 = 6;

pub const FI_ADDR_UNSPEC: u64 = u64::MAX;
pub const FI_ADDR_NOTAVAIL: u64 = u64::MAX;
pub const FI_KEY_NOTAVAIL: u64 = u64::MAX;

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn table() -> HashMap<String, i64> {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/abi/constants.tsv"
        ))
        .expect("constants.tsv");
        text.lines()
            .skip(1)
            .filter_map(|l| {
                let mut it = l.split('\t');
                Some((it.next()?.to_string(), it.next()?.parse().ok()?))
            })
            .collect()
    }

    #[test]
    fn values_match_the_abi_table() {
        let t = table();
        let check = |name: &str, v: i64| {
            assert_eq!(t.get(name).copied(), Some(v), "{name}");
        };
        for (n, v) in [
            ("FI_READ", FI_READ), ("FI_WRITE", FI_WRITE), ("FI_RECV", FI_RECV),
            ("FI_SEND", FI_SEND), ("FI_REMOTE_READ", FI_REMOTE_READ),
            ("FI_REMOTE_WRITE", FI_REMOTE_WRITE), ("FI_MULTI_RECV", FI_MULTI_RECV),
            ("FI_REMOTE_CQ_DATA", FI_REMOTE_CQ_DATA), ("FI_PEEK", FI_PEEK),
            ("FI_DISCARD", FI_DISCARD), ("FI_CLAIM", FI_CLAIM),
            ("FI_AV_USER_ID", FI_AV_USER_ID), ("FI_MORE", FI_MORE), ("FI_MR_VIRT_ADDR", FI_MR_VIRT_ADDR),
            ("FI_MR_PROV_KEY", FI_MR_PROV_KEY),
            ("FI_SYNC_ERR", FI_SYNC_ERR), ("FI_FIREWALL_ADDR", FI_FIREWALL_ADDR),
        ] {
            check(n, v as i64);
        }
        for (n, v) in [
            ("FI_EAGAIN", FI_EAGAIN), ("FI_EAVAIL", FI_EAVAIL), ("FI_ENOKEY", FI_ENOKEY),
            ("FI_EKEYREJECTED", FI_EKEYREJECTED), ("FI_ECANCELED", FI_ECANCELED),
            ("FI_EOVERFLOW", FI_EOVERFLOW), ("FI_ETIMEDOUT", FI_ETIMEDOUT),
            ("FI_ETOOSMALL", FI_ETOOSMALL), ("FI_ENOMSG", FI_ENOMSG),
            ("FI_EADDRNOTAVAIL", FI_EADDRNOTAVAIL), ("FI_EBADFLAGS", FI_EBADFLAGS), ("FI_EACCES", FI_EACCES), ("FI_ENOSPC", FI_ENOSPC),
        ] {
            check(n, v as i64);
        }
        for (n, v) in [
            ("FI_CQ_FORMAT_UNSPEC", FI_CQ_FORMAT_UNSPEC), ("FI_CQ_FORMAT_CONTEXT", FI_CQ_FORMAT_CONTEXT),
            ("FI_CQ_FORMAT_MSG", FI_CQ_FORMAT_MSG), ("FI_CQ_FORMAT_DATA", FI_CQ_FORMAT_DATA),
            ("FI_CQ_FORMAT_TAGGED", FI_CQ_FORMAT_TAGGED), ("FI_WAIT_NONE", FI_WAIT_NONE),
            ("FI_WAIT_UNSPEC", FI_WAIT_UNSPEC), ("FI_WAIT_SET", FI_WAIT_SET),
            ("FI_WAIT_FD", FI_WAIT_FD), ("FI_WAIT_MUTEX_COND", FI_WAIT_MUTEX_COND),
            ("FI_WAIT_YIELD", FI_WAIT_YIELD), ("FI_WAIT_POLLFD", FI_WAIT_POLLFD),
            ("FI_AV_UNSPEC", FI_AV_UNSPEC), ("FI_AV_MAP", FI_AV_MAP), ("FI_AV_TABLE", FI_AV_TABLE),
            ("FI_NOTIFY", FI_NOTIFY), ("FI_CONNREQ", FI_CONNREQ), ("FI_CONNECTED", FI_CONNECTED),
            ("FI_SHUTDOWN", FI_SHUTDOWN), ("FI_MR_COMPLETE", FI_MR_COMPLETE),
            ("FI_AV_COMPLETE", FI_AV_COMPLETE), ("FI_JOIN_COMPLETE", FI_JOIN_COMPLETE),
        ] {
            check(n, v as i64);
        }
        check("FI_ADDR_UNSPEC", FI_ADDR_UNSPEC as i64);
        check("FI_ADDR_NOTAVAIL", FI_ADDR_NOTAVAIL as i64);
        check("FI_KEY_NOTAVAIL", FI_KEY_NOTAVAIL as i64);
    }
}
