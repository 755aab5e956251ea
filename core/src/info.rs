//! The Rust model of an `fi_info` tree.
//!
//! Pointer-free attribute structs (`fi_tx_attr`, `fi_rx_attr`) are kept as
//! their C types; members that point somewhere (names, addresses, auth keys)
//! become owned Rust values. `capi` converts to and from the C-allocated tree
//! that applications see.
#![forbid(unsafe_code)]

use crate::abi::*;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EpAttr {
    pub ep_type: fi_ep_type,
    pub protocol: u32,
    pub protocol_version: u32,
    pub max_msg_size: usize,
    pub msg_prefix_size: usize,
    pub max_order_raw_size: usize,
    pub max_order_war_size: usize,
    pub max_order_waw_size: usize,
    pub mem_tag_format: u64,
    pub tx_ctx_cnt: usize,
    pub rx_ctx_cnt: usize,
    pub auth_key: Option<Vec<u8>>,
    /// `fid_xpu_ctx *`: an object handle, carried through unchanged.
    pub xpu_ctx: usize,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DomainAttr {
    /// `fid_domain *` an application may pass to open an endpoint on an
    /// existing domain; carried through unchanged.
    pub domain: usize,
    pub name: Option<String>,
    pub threading: fi_threading,
    pub control_progress: fi_progress,
    pub data_progress: fi_progress,
    pub resource_mgmt: fi_resource_mgmt,
    pub av_type: fi_av_type,
    pub mr_mode: i32,
    pub mr_key_size: usize,
    pub cq_data_size: usize,
    pub cq_cnt: usize,
    pub ep_cnt: usize,
    pub tx_ctx_cnt: usize,
    pub rx_ctx_cnt: usize,
    pub max_ep_tx_ctx: usize,
    pub max_ep_rx_ctx: usize,
    pub max_ep_stx_ctx: usize,
    pub max_ep_srx_ctx: usize,
    pub cntr_cnt: usize,
    pub mr_iov_limit: usize,
    pub caps: u64,
    pub mode: u64,
    pub auth_key: Option<Vec<u8>>,
    pub max_err_data: usize,
    pub mr_cnt: usize,
    pub tclass: u32,
    pub max_ep_auth_key: usize,
    pub max_group_id: u32,
    pub max_cntr_value: u64,
    pub max_err_cntr_value: u64,
    pub max_xpu_ctx_cnt: usize,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FabricAttr {
    /// `fid_fabric *`, carried through unchanged.
    pub fabric: usize,
    pub name: Option<String>,
    pub prov_name: Option<String>,
    pub prov_version: u32,
    pub api_version: u32,
}

/// One `fi_info`. `None` attributes mean the C pointer was NULL.
#[derive(Clone, Debug, Default)]
pub struct Info {
    pub caps: u64,
    pub mode: u64,
    pub addr_format: u32,
    pub src_addr: Option<Vec<u8>>,
    pub dest_addr: Option<Vec<u8>>,
    /// `fid_t handle`, carried through unchanged.
    pub handle: usize,
    pub tx_attr: Option<fi_tx_attr>,
    pub rx_attr: Option<fi_rx_attr>,
    pub ep_attr: Option<EpAttr>,
    pub domain_attr: Option<DomainAttr>,
    pub fabric_attr: Option<FabricAttr>,
    /// `fid_nic *`; providers of ours publish none, so it is never owned here.
    pub nic: usize,
}

impl Info {
    /// What `fi_allocinfo()` returns: every attribute present and zeroed.
    pub fn alloc() -> Info {
        Info {
            tx_attr: Some(fi_tx_attr::default()),
            rx_attr: Some(fi_rx_attr::default()),
            ep_attr: Some(EpAttr::default()),
            domain_attr: Some(DomainAttr::default()),
            fabric_attr: Some(FabricAttr::default()),
            ..Info::default()
        }
    }

    pub fn ep_type(&self) -> fi_ep_type {
        self.ep_attr.as_ref().map_or(FI_EP_UNSPEC, |e| e.ep_type)
    }

    pub fn prov_name(&self) -> Option<&str> {
        self.fabric_attr.as_ref().and_then(|f| f.prov_name.as_deref())
    }
}
