//! The printable address of an shm endpoint (`FI_ADDR_STR`): `fi_shm://`
//! and the 32 address bytes in URL-safe base64 (what `fi_getname`,
//! `fi_av_insert`, `fi_av_lookup` and `fi_av_straddr` use), or
//! `fi_shm://<name>` for a name given with `fi_setname`.

#![forbid(unsafe_code)]

use crate::peer::{Address, ADDR_LEN};
use rfabric_core::abi::FI_NAME_MAX;
use rfabric_core::error::{Result, EINVAL};

/// Prefix of the printable address (`FI_ADDR_STR`).
pub const ADDR_PREFIX: &str = "fi_shm://";
const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
/// Length of the printable address without its NUL: prefix + 43 characters.
pub const ADDR_STR_LEN: usize = 9 + 43;

/// `fi_shm://` followed by the 32 address bytes in URL-safe base64 (no
/// padding): 52 characters, so it fits `FI_NAME_MAX` with its NUL.
pub fn addr_to_str(a: &Address) -> String {
    let b = a.to_bytes();
    let mut s = String::with_capacity(ADDR_STR_LEN);
    s.push_str(ADDR_PREFIX);
    let mut acc = 0u32;
    let mut bits = 0;
    for &x in b.iter() {
        acc = acc << 8 | x as u32;
        bits += 8;
        while bits >= 6 {
            bits -= 6;
            s.push(B64[((acc >> bits) & 63) as usize] as char);
        }
    }
    if bits > 0 {
        s.push(B64[((acc << (6 - bits)) & 63) as usize] as char);
    }
    s
}

/// Parses [`addr_to_str`]'s form. A trailing NUL (and anything after it) is
/// ignored.
pub fn addr_from_str(raw: &[u8]) -> Result<Address> {
    let end = raw.iter().position(|&c| c == 0).unwrap_or(raw.len());
    let s = raw[..end].strip_prefix(ADDR_PREFIX.as_bytes()).ok_or(EINVAL)?;
    if s.len() != ADDR_STR_LEN - ADDR_PREFIX.len() {
        return Err(EINVAL);
    }
    let mut out = [0u8; ADDR_LEN];
    let mut n = 0;
    let mut acc = 0u32;
    let mut bits = 0;
    for &c in s {
        let v = B64.iter().position(|&x| x == c).ok_or(EINVAL)? as u32;
        acc = acc << 6 | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            if n < ADDR_LEN {
                out[n] = (acc >> bits) as u8;
                n += 1;
            }
        }
    }
    if n != ADDR_LEN {
        return Err(EINVAL);
    }
    Address::from_bytes(&out)
}

/// A printable address as `fi_setname` and `fi_av_insert` take it: our own
/// form ([`addr_to_str`]) or `fi_shm://<name>` with a name chosen by the
/// application (`segment::valid_ep_name`: 1..=40 of `[A-Za-z0-9._:-]`).
/// The two never meet: our form has exactly 43 characters after the prefix.
pub(super) enum StrAddr {
    Addr(Address),
    Name(String),
}

/// Parses a string address. With `need_nul` the string must end with a NUL
/// inside `raw` (fi_setname); otherwise a missing NUL ends it at `raw.len()`.
/// Either way it must fit `FI_NAME_MAX` with its NUL.
pub(super) fn parse_str_addr(raw: &[u8], need_nul: bool) -> Result<StrAddr> {
    let end = match raw.iter().position(|&c| c == 0) {
        Some(e) => e,
        None if need_nul => return Err(EINVAL),
        None => raw.len(),
    };
    if end >= FI_NAME_MAX {
        return Err(EINVAL);
    }
    if let Ok(a) = addr_from_str(&raw[..end]) {
        return Ok(StrAddr::Addr(a));
    }
    let name = raw[..end].strip_prefix(ADDR_PREFIX.as_bytes()).ok_or(EINVAL)?;
    let name = std::str::from_utf8(name).map_err(|_| EINVAL)?;
    if !crate::segment::valid_ep_name(name) {
        return Err(EINVAL);
    }
    Ok(StrAddr::Name(name.to_string()))
}
