//! `fi_getinfo` matching: is a provider's offer acceptable for the hints?
//!
//! Rules follow fi_getinfo(3): requested capabilities (primary and
//! secondary) must be offered; the provider's required mode bits must be
//! ones the application supports; named fabric, domain and provider must
//! match; attribute sizes and limits requested must not exceed the offer.
//! Each refusal is logged at `FI_LOG_LEVEL=info`, naming the provider, the
//! field, what was requested and what is supported.
#![forbid(unsafe_code)]

use crate::abi::*;
use crate::info::{DomainAttr, EpAttr, FabricAttr, Info};
use crate::provider::Request;

/// Capabilities fi_getinfo(3) calls secondary: a provider may return them
/// without being asked.
pub const SECONDARY_CAPS: u64 = FI_MULTI_RECV
    | FI_SOURCE
    | FI_RMA_EVENT
    | FI_SHARED_AV
    | FI_TRIGGER
    | FI_FENCE
    | FI_LOCAL_COMM
    | FI_REMOTE_COMM
    | FI_SOURCE_ERR
    | FI_RMA_PMEM;

/// The reason an offer was refused, already logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch(pub String);

struct Checker<'a> {
    prov: &'a str,
    why: Option<String>,
}

impl Checker<'_> {
    fn fail(&mut self, field: &str, requested: String, supported: String) {
        if self.why.is_none() {
            let msg = format!("{field}: requested {requested}, supported {supported}");
            crate::fi_info!(self.prov, FI_LOG_CORE, "{}", msg);
            self.why = Some(msg);
        }
    }

    /// Every bit of `req` must be in `have`.
    fn bits(&mut self, field: &str, req: u64, have: u64, ty: u32) {
        let missing = req & !have;
        if missing != 0 {
            crate::fi_info!(
                self.prov,
                FI_LOG_CORE,
                "{field}: unsupported bits requested: {}",
                bits_str(missing, ty)
            );
            self.fail(field, bits_str(req, ty), bits_str(have, ty));
        }
    }

    fn at_most(&mut self, field: &str, req: u64, have: u64) {
        if req > have {
            self.fail(field, req.to_string(), format!("at most {have}"));
        }
    }

    fn same_or_unspec(&mut self, field: &str, req: u32, have: u32, unspec: u32, ty: u32) {
        if req != unspec && req != have {
            self.fail(field, enum_str(req, ty), enum_str(have, ty));
        }
    }
}

fn bits_str(v: u64, ty: u32) -> String {
    let s = crate::tostr::tostr_value(v, ty);
    if s.is_empty() { format!("{v:#x}") } else { s }
}

fn enum_str(v: u32, ty: u32) -> String {
    let s = crate::tostr::tostr_value(v as u64, ty);
    if s.is_empty() { v.to_string() } else { s }
}

/// Check one offer against the hints. `Ok(())` means the provider can
/// serve the request; the offer is then narrowed by [`narrow`].
/// Whether an application asking for addresses of `user`'s format can use
/// an offer of `offer`'s: the same format, or a generic socket-address
/// format that covers it (`FI_SOCKADDR`: any socket address;
/// `FI_SOCKADDR_IP`: IPv4 or IPv6), as upstream matches them.
pub fn addr_format_ok(offer: u32, user: u32) -> bool {
    if user == FI_FORMAT_UNSPEC || offer == FI_FORMAT_UNSPEC || user == offer {
        return true;
    }
    match offer {
        FI_SOCKADDR_IN | FI_SOCKADDR_IN6 => user == FI_SOCKADDR || user == FI_SOCKADDR_IP,
        FI_SOCKADDR_IB => user == FI_SOCKADDR,
        FI_SOCKADDR_IP => matches!(user, FI_SOCKADDR | FI_SOCKADDR_IN | FI_SOCKADDR_IN6),
        FI_SOCKADDR => matches!(user, FI_SOCKADDR_IP | FI_SOCKADDR_IN | FI_SOCKADDR_IN6 | FI_SOCKADDR_IB),
        _ => false,
    }
}

pub fn check(prov: &str, offer: &Info, hints: &Info, version: u32) -> Result<(), Mismatch> {
    let mut c = Checker { prov, why: None };
    c.bits("caps", hints.caps, offer.caps, FI_TYPE_CAPS);
    if hints.mode != 0 || version >= fi_version(1, 5) {
        // The provider's required modes must all be supported by the app.
        let needed = offer.mode & !hints.mode;
        if needed != 0 && hints.mode != 0 {
            c.fail("mode", bits_str(hints.mode, FI_TYPE_MODE), format!("needs {}", bits_str(offer.mode, FI_TYPE_MODE)));
        }
    }
    if !addr_format_ok(offer.addr_format, hints.addr_format) {
        c.fail("addr_format", enum_str(hints.addr_format, FI_TYPE_ADDR_FORMAT), enum_str(offer.addr_format, FI_TYPE_ADDR_FORMAT));
    }
    if let (Some(h), Some(o)) = (&hints.fabric_attr, &offer.fabric_attr) {
        check_fabric(&mut c, h, o);
    }
    // Shared contexts only where the domain has them (fi_stx_context /
    // fi_srx_context), as upstream matches them.
    if let Some(h) = &hints.ep_attr {
        let d = offer.domain_attr.as_ref();
        if h.tx_ctx_cnt == FI_SHARED_CONTEXT && d.map_or(0, |d| d.max_ep_stx_ctx) == 0 {
            c.fail("ep_attr->tx_ctx_cnt", "FI_SHARED_CONTEXT".into(), "no shared transmit contexts".into());
        }
        if h.rx_ctx_cnt == FI_SHARED_CONTEXT && d.map_or(0, |d| d.max_ep_srx_ctx) == 0 {
            c.fail("ep_attr->rx_ctx_cnt", "FI_SHARED_CONTEXT".into(), "no shared receive contexts".into());
        }
    }
    if let (Some(h), Some(o)) = (&hints.domain_attr, &offer.domain_attr) {
        check_domain(&mut c, h, o, version);
    }
    if let (Some(h), Some(o)) = (&hints.ep_attr, &offer.ep_attr) {
        check_ep(&mut c, h, o);
    }
    if let (Some(h), Some(o)) = (&hints.tx_attr, &offer.tx_attr) {
        c.bits("tx_attr->caps", h.caps, o.caps | offer.caps, FI_TYPE_CAPS);
        if h.mode != 0 && o.mode & !h.mode != 0 {
            c.fail("tx_attr->mode", bits_str(h.mode, FI_TYPE_MODE), format!("needs {}", bits_str(o.mode, FI_TYPE_MODE)));
        }
        c.bits("tx_attr->op_flags", h.op_flags, o.op_flags | TX_OP_FLAGS_ALLOWED, FI_TYPE_OP_FLAGS);
        c.bits("tx_attr->msg_order", h.msg_order, o.msg_order, FI_TYPE_MSG_ORDER);
        c.bits("tx_attr->comp_order", h.comp_order, o.comp_order, FI_TYPE_MSG_ORDER);
        c.at_most("tx_attr->inject_size", h.inject_size as u64, o.inject_size as u64);
        c.at_most("tx_attr->size", h.size as u64, o.size as u64);
        c.at_most("tx_attr->iov_limit", h.iov_limit as u64, o.iov_limit as u64);
        c.at_most("tx_attr->rma_iov_limit", h.rma_iov_limit as u64, o.rma_iov_limit as u64);
    }
    if let (Some(h), Some(o)) = (&hints.rx_attr, &offer.rx_attr) {
        c.bits("rx_attr->caps", h.caps, o.caps | offer.caps, FI_TYPE_CAPS);
        if h.mode != 0 && o.mode & !h.mode != 0 {
            c.fail("rx_attr->mode", bits_str(h.mode, FI_TYPE_MODE), format!("needs {}", bits_str(o.mode, FI_TYPE_MODE)));
        }
        c.bits("rx_attr->op_flags", h.op_flags, o.op_flags | RX_OP_FLAGS_ALLOWED, FI_TYPE_OP_FLAGS);
        c.bits("rx_attr->msg_order", h.msg_order, o.msg_order, FI_TYPE_MSG_ORDER);
        c.bits("rx_attr->comp_order", h.comp_order, o.comp_order, FI_TYPE_MSG_ORDER);
        c.at_most("rx_attr->total_buffered_recv", h.total_buffered_recv as u64, o.total_buffered_recv as u64);
        c.at_most("rx_attr->size", h.size as u64, o.size as u64);
        c.at_most("rx_attr->iov_limit", h.iov_limit as u64, o.iov_limit as u64);
    }
    match c.why {
        None => Ok(()),
        Some(w) => Err(Mismatch(w)),
    }
}

/// Default op flags an application may set on a context: completion
/// selection and ordering flags every provider of ours honours.
const TX_OP_FLAGS_ALLOWED: u64 = FI_COMPLETION
    | FI_INJECT
    | FI_INJECT_COMPLETE
    | FI_TRANSMIT_COMPLETE
    | FI_DELIVERY_COMPLETE
    | FI_COMMIT_COMPLETE
    | FI_FENCE;
const RX_OP_FLAGS_ALLOWED: u64 = FI_COMPLETION | FI_MULTI_RECV;

fn names_match(req: &Option<String>, have: &Option<String>) -> bool {
    match (req, have) {
        (Some(r), Some(h)) => r == h,
        (Some(_), None) => false,
        (None, _) => true,
    }
}

/// `prov_name` in hints may name a layered provider (`tcp;ofi_rxm`); an
/// offer matches when its name equals the request or any of its parts.
pub fn prov_name_matches(req: &str, have: &str) -> bool {
    if req.eq_ignore_ascii_case(have) {
        return true;
    }
    req.split(';').any(|part| part.eq_ignore_ascii_case(have))
}

fn check_fabric(c: &mut Checker<'_>, h: &FabricAttr, o: &FabricAttr) {
    if !names_match(&h.name, &o.name) {
        c.fail("fabric_attr->name", format!("{:?}", h.name), format!("{:?}", o.name));
    }
    if let Some(r) = &h.prov_name {
        let have = o.prov_name.as_deref().unwrap_or(c.prov);
        if !prov_name_matches(r, have) {
            c.fail("fabric_attr->prov_name", r.clone(), have.to_string());
        }
    }
    if h.prov_version != 0 && h.prov_version > o.prov_version {
        c.fail("fabric_attr->prov_version", h.prov_version.to_string(), o.prov_version.to_string());
    }
}

fn threading_rank(t: fi_threading) -> u32 {
    // Smaller is stronger: a provider offering FI_THREAD_SAFE serves every
    // request, one offering FI_THREAD_DOMAIN serves DOMAIN and weaker.
    t
}

fn check_domain(c: &mut Checker<'_>, h: &DomainAttr, o: &DomainAttr, version: u32) {
    if !names_match(&h.name, &o.name) {
        c.fail("domain_attr->name", format!("{:?}", h.name), format!("{:?}", o.name));
    }
    if h.threading != FI_THREAD_UNSPEC && threading_rank(h.threading) < threading_rank(o.threading) {
        c.fail("domain_attr->threading", enum_str(h.threading, FI_TYPE_THREADING), enum_str(o.threading, FI_TYPE_THREADING));
    }
    c.same_or_unspec("domain_attr->control_progress", h.control_progress, o.control_progress, FI_PROGRESS_UNSPEC, FI_TYPE_PROGRESS);
    c.same_or_unspec("domain_attr->data_progress", h.data_progress, o.data_progress, FI_PROGRESS_UNSPEC, FI_TYPE_PROGRESS);
    if h.resource_mgmt != FI_RM_UNSPEC && h.resource_mgmt != o.resource_mgmt {
        c.fail("domain_attr->resource_mgmt", h.resource_mgmt.to_string(), o.resource_mgmt.to_string());
    }
    // A provider offering FI_AV_UNSPEC serves either type.
    if o.av_type != FI_AV_UNSPEC {
        c.same_or_unspec("domain_attr->av_type", h.av_type, o.av_type, FI_AV_UNSPEC, FI_TYPE_AV_TYPE);
    }
    check_mr_mode(c, h.mr_mode, o.mr_mode, version);
    c.at_most("domain_attr->mr_key_size", h.mr_key_size as u64, o.mr_key_size as u64);
    c.at_most("domain_attr->cq_data_size", h.cq_data_size as u64, o.cq_data_size as u64);
    c.at_most("domain_attr->cq_cnt", h.cq_cnt as u64, o.cq_cnt as u64);
    c.at_most("domain_attr->ep_cnt", h.ep_cnt as u64, o.ep_cnt as u64);
    c.at_most("domain_attr->tx_ctx_cnt", h.tx_ctx_cnt as u64, o.tx_ctx_cnt as u64);
    c.at_most("domain_attr->rx_ctx_cnt", h.rx_ctx_cnt as u64, o.rx_ctx_cnt as u64);
    c.at_most("domain_attr->max_ep_tx_ctx", h.max_ep_tx_ctx as u64, o.max_ep_tx_ctx as u64);
    c.at_most("domain_attr->max_ep_rx_ctx", h.max_ep_rx_ctx as u64, o.max_ep_rx_ctx as u64);
    c.at_most("domain_attr->max_ep_stx_ctx", h.max_ep_stx_ctx as u64, o.max_ep_stx_ctx as u64);
    c.at_most("domain_attr->max_ep_srx_ctx", h.max_ep_srx_ctx as u64, o.max_ep_srx_ctx as u64);
    c.at_most("domain_attr->cntr_cnt", h.cntr_cnt as u64, o.cntr_cnt as u64);
    c.at_most("domain_attr->mr_iov_limit", h.mr_iov_limit as u64, o.mr_iov_limit as u64);
    c.bits("domain_attr->caps", h.caps, o.caps, FI_TYPE_CAPS);
    if h.mode != 0 && o.mode & !h.mode != 0 {
        c.fail("domain_attr->mode", bits_str(h.mode, FI_TYPE_MODE), format!("needs {}", bits_str(o.mode, FI_TYPE_MODE)));
    }
    c.at_most("domain_attr->max_err_data", h.max_err_data as u64, o.max_err_data as u64);
    c.at_most("domain_attr->mr_cnt", h.mr_cnt as u64, o.mr_cnt as u64);
    c.at_most("domain_attr->max_xpu_ctx_cnt", h.max_xpu_ctx_cnt as u64, o.max_xpu_ctx_cnt as u64);
    if let Some(k) = &h.auth_key {
        if k.len() > o.max_ep_auth_key.max(o.auth_key.as_ref().map_or(0, |a| a.len())) && o.auth_key.is_none() {
            c.fail("domain_attr->auth_key_size", k.len().to_string(), "no authorization keys".into());
        }
    }
}

/// The `FI_MR_*` bits the application must support for the offer: the
/// provider's required bits must be a subset of what the app sets. Before
/// API 1.5 the field held `FI_MR_BASIC` or `FI_MR_SCALABLE`, which stand for
/// fixed bit sets; `FI_MR_UNSPEC` (0) accepts any mode.
pub fn mr_mode_bits(mode: i32, version: u32) -> u64 {
    let m = mode as u32 as u64;
    if version < fi_version(1, 5) || m == FI_MR_BASIC as u64 || m == FI_MR_SCALABLE as u64 {
        if m == FI_MR_BASIC as u64 {
            return FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
        }
        if m == FI_MR_SCALABLE as u64 {
            return 0;
        }
    }
    m
}

fn check_mr_mode(c: &mut Checker<'_>, req: i32, have: i32, version: u32) {
    if req == 0 {
        return;
    }
    let app = mr_mode_bits(req, version);
    let needed = have as u32 as u64;
    // FI_MR_BASIC is the old spelling of VIRT_ADDR|ALLOCATED|PROV_KEY.
    let needed = mr_mode_bits(needed as i32, fi_version(1, 5));
    let missing = needed & !app & !((FI_MR_BASIC | FI_MR_SCALABLE) as u64);
    if missing != 0 {
        c.fail("domain_attr->mr_mode", bits_str(app, FI_TYPE_MR_MODE), format!("needs {}", bits_str(needed, FI_TYPE_MR_MODE)));
    }
}

fn check_ep(c: &mut Checker<'_>, h: &EpAttr, o: &EpAttr) {
    c.same_or_unspec("ep_attr->type", h.ep_type, o.ep_type, FI_EP_UNSPEC, FI_TYPE_EP_TYPE);
    if h.protocol != FI_PROTO_UNSPEC && h.protocol != o.protocol {
        c.fail("ep_attr->protocol", enum_str(h.protocol, FI_TYPE_PROTOCOL), enum_str(o.protocol, FI_TYPE_PROTOCOL));
    }
    if h.protocol_version != 0 && h.protocol_version > o.protocol_version {
        c.fail("ep_attr->protocol_version", h.protocol_version.to_string(), o.protocol_version.to_string());
    }
    c.at_most("ep_attr->max_msg_size", h.max_msg_size as u64, o.max_msg_size as u64);
    c.at_most("ep_attr->max_order_raw_size", h.max_order_raw_size as u64, o.max_order_raw_size as u64);
    c.at_most("ep_attr->max_order_war_size", h.max_order_war_size as u64, o.max_order_war_size as u64);
    c.at_most("ep_attr->max_order_waw_size", h.max_order_waw_size as u64, o.max_order_waw_size as u64);
    if h.tx_ctx_cnt != FI_SHARED_CONTEXT {
        c.at_most("ep_attr->tx_ctx_cnt", h.tx_ctx_cnt as u64, o.tx_ctx_cnt as u64);
    }
    if h.rx_ctx_cnt != FI_SHARED_CONTEXT {
        c.at_most("ep_attr->rx_ctx_cnt", h.rx_ctx_cnt as u64, o.rx_ctx_cnt as u64);
    }
    if h.mem_tag_format != 0 && o.mem_tag_format != 0 && h.mem_tag_format.count_ones() > 64 {
        c.fail("ep_attr->mem_tag_format", format!("{:#x}", h.mem_tag_format), format!("{:#x}", o.mem_tag_format));
    }
}

/// Fit a matched offer to the hints: the returned info carries what the
/// application asked for where the provider can give it (caps narrowed to
/// the request plus secondary caps, app-chosen sizes and orders kept),
/// otherwise the provider's defaults.
pub fn narrow(offer: &Info, hints: &Info) -> Info {
    let mut out = offer.clone();
    if hints.caps != 0 {
        out.caps = (hints.caps & offer.caps) | (offer.caps & SECONDARY_CAPS & !(FI_REMOTE_COMM | FI_LOCAL_COMM))
            | (offer.caps & hints.caps & (FI_REMOTE_COMM | FI_LOCAL_COMM));
        if hints.caps & (FI_LOCAL_COMM | FI_REMOTE_COMM) == 0 {
            out.caps |= offer.caps & (FI_LOCAL_COMM | FI_REMOTE_COMM);
        }
        // No direction modifier asked for means every direction
        // (fi_getinfo(3)): the answer names them, so that an application
        // can pass `info->caps & FI_REMOTE_WRITE` on as bind flags.
        const MSG_DIRS: u64 = FI_SEND | FI_RECV;
        const RMA_DIRS: u64 = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
        if out.caps & (FI_MSG | FI_TAGGED) != 0 && hints.caps & MSG_DIRS == 0 {
            out.caps |= offer.caps & MSG_DIRS;
        }
        if out.caps & (FI_RMA | FI_ATOMIC) != 0 && hints.caps & RMA_DIRS == 0 {
            out.caps |= offer.caps & RMA_DIRS;
        }
    }
    if hints.mode != 0 {
        out.mode = offer.mode & hints.mode;
    }
    // The members fi_tx_attr and fi_rx_attr share are narrowed alike: a
    // value the application gave replaces the offer's, modes are intersected.
    macro_rules! narrow_ctx_attr {
        ($h:expr, $o:expr, $caps:expr, $($field:ident),*) => {{
            let (h, o) = ($h, $o);
            if let Some(caps) = $caps {
                o.caps &= caps;
            }
            $(
                if h.$field != 0 {
                    o.$field = h.$field;
                }
            )*
            if h.mode != 0 {
                o.mode &= h.mode;
            }
        }};
    }
    // Sub-attribute caps follow the narrowed caps when the app gave caps.
    let out_caps = (hints.caps != 0).then_some(out.caps);
    if let (Some(h), Some(o)) = (&hints.tx_attr, out.tx_attr.as_mut()) {
        narrow_ctx_attr!(h, o, out_caps, op_flags, msg_order, comp_order, inject_size, size, iov_limit);
    }
    if let (Some(h), Some(o)) = (&hints.rx_attr, out.rx_attr.as_mut()) {
        narrow_ctx_attr!(h, o, out_caps, op_flags, msg_order, comp_order, size, iov_limit);
    }
    if let (Some(h), Some(o)) = (&hints.domain_attr, out.domain_attr.as_mut()) {
        if h.threading != FI_THREAD_UNSPEC {
            o.threading = h.threading;
        }
        if h.av_type != FI_AV_UNSPEC {
            o.av_type = h.av_type;
        }
        if h.mr_mode != 0 && h.mr_mode as u32 != FI_MR_BASIC && h.mr_mode as u32 != FI_MR_SCALABLE {
            // Report only the bits both sides agree on.
            o.mr_mode = (o.mr_mode as u32 & h.mr_mode as u32) as i32;
        }
        if h.resource_mgmt != FI_RM_UNSPEC {
            o.resource_mgmt = h.resource_mgmt;
        }
        if h.auth_key.is_some() {
            o.auth_key = h.auth_key.clone();
        }
    }
    if let (Some(h), Some(o)) = (&hints.ep_attr, out.ep_attr.as_mut()) {
        if h.mem_tag_format != 0 {
            o.mem_tag_format = h.mem_tag_format;
        }
        if h.auth_key.is_some() {
            o.auth_key = h.auth_key.clone();
        }
        if h.tx_ctx_cnt == FI_SHARED_CONTEXT {
            o.tx_ctx_cnt = h.tx_ctx_cnt;
        }
        if h.rx_ctx_cnt == FI_SHARED_CONTEXT {
            o.rx_ctx_cnt = h.rx_ctx_cnt;
        }
    }
    if hints.handle != 0 {
        out.handle = hints.handle;
    }
    out
}

/// Run the whole match for one built-in provider: each offer is checked,
/// narrowed and resolved; refusals are logged.
pub fn match_provider(p: &dyn crate::provider::Provider, req: &Request<'_>) -> Vec<Info> {
    let mut out = Vec::new();
    for offer in p.offers() {
        let fitted = match req.hints {
            Some(h) => match check(p.name(), &offer, h, req.version) {
                Ok(()) => narrow(&offer, h),
                Err(_) => continue,
            },
            None => offer,
        };
        match p.resolve(fitted, req) {
            Ok(i) => out.push(i),
            Err(e) => crate::fi_info!(p.name(), FI_LOG_CORE, "cannot resolve node/service: {}", e),
        }
    }
    out
}

/// What `FI_PROV_ATTR_ONLY` returns: one entry per provider with only the
/// fabric attributes' provider name and version.
pub fn prov_attr_only(name: &str, version: u32, api_version: u32) -> Info {
    Info {
        fabric_attr: Some(FabricAttr {
            prov_name: Some(name.to_string()),
            prov_version: version,
            api_version,
            ..FabricAttr::default()
        }),
        ..Info::default()
    }
}

#[cfg(test)]
#[path = "getinfo_tests.rs"]
mod tests;
