//! The C struct shapes the versioned `fi_getinfo` family converts between.
//!
//! The old shapes (`*_1_0` … `*_1_9`) are exactly the ones in
//! `tests/abi/layout-compat.tsv`; the current ones are those of
//! `tests/abi/layout.tsv`. Every old shape is a byte prefix of the current
//! one, which is what lets the conversions copy "the first N bytes".
//!
//! The old shapes here are untyped views (attribute pointers are `void *`),
//! which keeps the conversions generic over versions; `rfabric_core::abi`
//! has the typed mirrors. Both are checked against the same table.
#![allow(non_camel_case_types, dead_code)]
#![forbid(unsafe_code)]

use core::ffi::{c_char, c_int, c_void};


/// Declares a `#[repr(C)]` struct and a table of its members
/// (name, offset, size) for the layout tests.
macro_rules! c_struct {
    ($(#[$m:meta])* $name:ident { $($f:ident : $t:ty),* $(,)? }) => {
        $(#[$m])*
        #[repr(C)]
        #[derive(Clone, Copy)]
        pub struct $name { $(pub $f: $t),* }
        impl $name {
            #[cfg(test)]
            pub const MEMBERS: &'static [(&'static str, usize, usize)] = &[
                $((stringify!($f), ::core::mem::offset_of!($name, $f), ::core::mem::size_of::<$t>())),*
            ];
        }
    };
}

// ---- old shapes (layout-compat.tsv) ----

c_struct!(fi_fabric_attr_1_0 {
    fabric: *mut c_void,
    name: *mut c_char,
    prov_name: *mut c_char,
    prov_version: u32,
});

c_struct!(fi_tx_attr_1_0 {
    caps: u64,
    mode: u64,
    op_flags: u64,
    msg_order: u64,
    comp_order: u64,
    inject_size: usize,
    size: usize,
    iov_limit: usize,
    rma_iov_limit: usize,
});

c_struct!(fi_ep_attr_1_0 {
    r#type: u32,
    protocol: u32,
    protocol_version: u32,
    max_msg_size: usize,
    msg_prefix_size: usize,
    max_order_raw_size: usize,
    max_order_war_size: usize,
    max_order_waw_size: usize,
    mem_tag_format: u64,
    tx_ctx_cnt: usize,
    rx_ctx_cnt: usize,
});

c_struct!(
    /// The endpoint attributes of ABI 1.1 through 1.9 (with the auth key).
    fi_ep_attr_1_9 {
    r#type: u32,
    protocol: u32,
    protocol_version: u32,
    max_msg_size: usize,
    msg_prefix_size: usize,
    max_order_raw_size: usize,
    max_order_war_size: usize,
    max_order_waw_size: usize,
    mem_tag_format: u64,
    tx_ctx_cnt: usize,
    rx_ctx_cnt: usize,
    auth_key_size: usize,
    auth_key: *mut u8,
});

/// The domain attribute members every version has, in order; each old
/// domain shape appends a tail to it.
macro_rules! domain_shape {
    ($name:ident { $($f:ident : $t:ty),* $(,)? }) => {
        c_struct!($name {
            domain: *mut c_void,
            name: *mut c_char,
            threading: u32,
            control_progress: u32,
            data_progress: u32,
            resource_mgmt: u32,
            av_type: u32,
            mr_mode: c_int,
            mr_key_size: usize,
            cq_data_size: usize,
            cq_cnt: usize,
            ep_cnt: usize,
            tx_ctx_cnt: usize,
            rx_ctx_cnt: usize,
            max_ep_tx_ctx: usize,
            max_ep_rx_ctx: usize,
            max_ep_stx_ctx: usize,
            max_ep_srx_ctx: usize,
            $($f: $t),*
        });
    };
}

domain_shape!(fi_domain_attr_1_0 {});
domain_shape!(fi_domain_attr_1_1 {
    cntr_cnt: usize, mr_iov_limit: usize, caps: u64, mode: u64,
    auth_key: *mut u8, auth_key_size: usize, max_err_data: usize, mr_cnt: usize,
});
domain_shape!(fi_domain_attr_1_3 {
    cntr_cnt: usize, mr_iov_limit: usize, caps: u64, mode: u64,
    auth_key: *mut u8, auth_key_size: usize, max_err_data: usize, mr_cnt: usize,
    tclass: u32,
});
domain_shape!(fi_domain_attr_1_7 {
    cntr_cnt: usize, mr_iov_limit: usize, caps: u64, mode: u64,
    auth_key: *mut u8, auth_key_size: usize, max_err_data: usize, mr_cnt: usize,
    tclass: u32, max_ep_auth_key: usize,
});
domain_shape!(fi_domain_attr_1_8 {
    cntr_cnt: usize, mr_iov_limit: usize, caps: u64, mode: u64,
    auth_key: *mut u8, auth_key_size: usize, max_err_data: usize, mr_cnt: usize,
    tclass: u32, max_ep_auth_key: usize, max_group_id: u32,
});
domain_shape!(fi_domain_attr_1_9 {
    cntr_cnt: usize, mr_iov_limit: usize, caps: u64, mode: u64,
    auth_key: *mut u8, auth_key_size: usize, max_err_data: usize, mr_cnt: usize,
    tclass: u32, max_ep_auth_key: usize, max_group_id: u32,
    max_cntr_value: u64, max_err_cntr_value: u64,
});

/// The `fi_info` members every version has; `with_nic` adds the `nic`
/// member of ABI 1.2 and later. Attribute pointers are untyped: which
/// shape they point to depends on the version.
macro_rules! info_shape {
    ($name:ident $(, $nic:ident)?) => {
        c_struct!($name {
            next: *mut c_void,
            caps: u64,
            mode: u64,
            addr_format: u32,
            src_addrlen: usize,
            dest_addrlen: usize,
            src_addr: *mut c_void,
            dest_addr: *mut c_void,
            handle: *mut c_void,
            tx_attr: *mut c_void,
            rx_attr: *mut c_void,
            ep_attr: *mut c_void,
            domain_attr: *mut c_void,
            fabric_attr: *mut c_void,
            $($nic: *mut c_void,)?
        });
    };
}

info_shape!(fi_info_1_0);
info_shape!(fi_info_1_1);
info_shape!(fi_info_1_2, nic);
info_shape!(fi_info_1_3, nic);
info_shape!(fi_info_1_7, nic);
info_shape!(fi_info_1_8, nic);
info_shape!(fi_info_1_9, nic);
