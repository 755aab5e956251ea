#![forbid(unsafe_code)]
use super::*;
use crate::info::{DomainAttr, EpAttr, FabricAttr, Info};

fn offer() -> Info {
    let mut i = Info::alloc();
    i.caps = FI_MSG | FI_TAGGED | FI_SEND | FI_RECV | FI_LOCAL_COMM | FI_SOURCE;
    i.addr_format = FI_ADDR_STR;
    i.mode = FI_CONTEXT;
    let tx = i.tx_attr.as_mut().unwrap();
    tx.inject_size = 64;
    tx.size = 128;
    tx.iov_limit = 4;
    tx.msg_order = FI_ORDER_SAS;
    i.ep_attr = Some(EpAttr { ep_type: FI_EP_RDM, max_msg_size: 1 << 20, tx_ctx_cnt: 1, rx_ctx_cnt: 1, ..EpAttr::default() });
    i.domain_attr = Some(DomainAttr {
        name: Some("dom".into()),
        threading: FI_THREAD_DOMAIN,
        control_progress: FI_PROGRESS_MANUAL,
        data_progress: FI_PROGRESS_MANUAL,
        mr_mode: (FI_MR_LOCAL | FI_MR_VIRT_ADDR) as i32,
        cq_cnt: 8,
        ..DomainAttr::default()
    });
    i.fabric_attr = Some(FabricAttr { name: Some("fab".into()), prov_name: Some("p".into()), prov_version: 5, ..FabricAttr::default() });
    i
}

fn hints() -> Info {
    let mut h = Info::alloc();
    h.mode = FI_CONTEXT;
    h
}

const V: u32 = fi_version(2, 8);

#[test]
fn empty_hints_match() {
    assert!(check("p", &offer(), &hints(), V).is_ok());
}

#[test]
fn caps_primary_and_secondary() {
    let mut h = hints();
    h.caps = FI_MSG | FI_SOURCE;
    assert!(check("p", &offer(), &h, V).is_ok());
    h.caps = FI_RMA;
    assert!(check("p", &offer(), &h, V).unwrap_err().0.contains("caps"));
    h.caps = FI_MSG | FI_REMOTE_COMM;
    assert!(check("p", &offer(), &h, V).is_err());
}

#[test]
fn narrowed_caps_keep_secondary_and_drop_unrequested_primary() {
    let mut h = hints();
    h.caps = FI_MSG;
    let n = narrow(&offer(), &h);
    assert_eq!(n.caps & FI_TAGGED, 0);
    assert_ne!(n.caps & FI_MSG, 0);
    assert_ne!(n.caps & FI_SOURCE, 0, "secondary caps may be returned");
}

#[test]
fn required_mode_must_be_supported() {
    let mut h = hints();
    h.mode = FI_MSG_PREFIX;
    assert!(check("p", &offer(), &h, V).unwrap_err().0.contains("mode"));
}

#[test]
fn ep_type_addr_format_and_names() {
    let mut h = hints();
    h.ep_attr.as_mut().unwrap().ep_type = FI_EP_MSG;
    assert!(check("p", &offer(), &h, V).is_err());
    let mut h = hints();
    h.addr_format = FI_SOCKADDR_IN;
    assert!(check("p", &offer(), &h, V).is_err());
    let mut h = hints();
    h.domain_attr.as_mut().unwrap().name = Some("other".into());
    assert!(check("p", &offer(), &h, V).is_err());
    let mut h = hints();
    h.fabric_attr.as_mut().unwrap().name = Some("fab".into());
    h.fabric_attr.as_mut().unwrap().prov_name = Some("x;p".into());
    assert!(check("p", &offer(), &h, V).is_ok());
    h.fabric_attr.as_mut().unwrap().prov_name = Some("q".into());
    assert!(check("p", &offer(), &h, V).is_err());
}

#[test]
fn threading_order() {
    let mut h = hints();
    h.domain_attr.as_mut().unwrap().threading = FI_THREAD_SAFE;
    assert!(check("p", &offer(), &h, V).is_err(), "DOMAIN offer cannot serve SAFE");
    h.domain_attr.as_mut().unwrap().threading = FI_THREAD_ENDPOINT;
    assert!(check("p", &offer(), &h, V).is_ok(), "DOMAIN offer serves ENDPOINT");
}

#[test]
fn limits_and_sizes() {
    let mut h = hints();
    h.tx_attr.as_mut().unwrap().inject_size = 65;
    assert!(check("p", &offer(), &h, V).unwrap_err().0.contains("inject_size"));
    let mut h = hints();
    h.ep_attr.as_mut().unwrap().max_msg_size = 2 << 20;
    assert!(check("p", &offer(), &h, V).is_err());
    let mut h = hints();
    h.tx_attr.as_mut().unwrap().inject_size = 16;
    let n = narrow(&offer(), &h);
    assert_eq!(n.tx_attr.unwrap().inject_size, 16);
}

#[test]
fn mr_mode_rules() {
    let mut h = hints();
    // App supports nothing the provider requires.
    h.domain_attr.as_mut().unwrap().mr_mode = FI_MR_ALLOCATED as i32;
    assert!(check("p", &offer(), &h, V).unwrap_err().0.contains("mr_mode"));
    h.domain_attr.as_mut().unwrap().mr_mode = (FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED) as i32;
    assert!(check("p", &offer(), &h, V).is_ok());
    // FI_MR_UNSPEC accepts any.
    h.domain_attr.as_mut().unwrap().mr_mode = 0;
    assert!(check("p", &offer(), &h, V).is_ok());
    // Before 1.5, FI_MR_BASIC stands for VIRT_ADDR|ALLOCATED|PROV_KEY: no FI_MR_LOCAL.
    h.domain_attr.as_mut().unwrap().mr_mode = FI_MR_BASIC as i32;
    assert!(check("p", &offer(), &h, fi_version(1, 4)).is_err());
}

#[test]
fn progress_must_match_when_given() {
    let mut h = hints();
    h.domain_attr.as_mut().unwrap().data_progress = FI_PROGRESS_AUTO;
    assert!(check("p", &offer(), &h, V).is_err());
    h.domain_attr.as_mut().unwrap().data_progress = FI_PROGRESS_MANUAL;
    assert!(check("p", &offer(), &h, V).is_ok());
}

#[test]
fn prov_attr_only_has_only_names() {
    let i = prov_attr_only("shm", 7, V);
    assert!(i.tx_attr.is_none() && i.domain_attr.is_none());
    assert_eq!(i.prov_name(), Some("shm"));
}

#[test]
fn unspec_av_type_serves_any() {
    let mut o = offer();
    let mut h = hints();
    h.domain_attr.as_mut().unwrap().av_type = FI_AV_TABLE;
    assert!(check("p", &o, &h, V).is_ok());
    assert_eq!(narrow(&o, &h).domain_attr.unwrap().av_type, FI_AV_TABLE);
    o.domain_attr.as_mut().unwrap().av_type = FI_AV_MAP;
    assert!(check("p", &o, &h, V).is_err());
}

#[test]
fn unrequested_directions_are_all_named() {
    let mut o = offer();
    o.caps |= FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
    // No modifier asked for: every direction the offer has.
    let mut h = hints();
    h.caps = FI_MSG | FI_RMA;
    let n = narrow(&o, &h);
    assert_eq!(n.caps & (FI_SEND | FI_RECV), FI_SEND | FI_RECV);
    assert_eq!(n.caps & (FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE), FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE);
    // A modifier asked for restricts its class to what was asked.
    h.caps = FI_MSG | FI_RECV | FI_RMA | FI_REMOTE_WRITE;
    let n = narrow(&o, &h);
    assert_eq!(n.caps & (FI_SEND | FI_RECV), FI_RECV);
    assert_eq!(n.caps & (FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE), FI_REMOTE_WRITE);
    // No class, no directions.
    h.caps = FI_TAGGED;
    let n = narrow(&o, &h);
    assert_eq!(n.caps & (FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE), 0);
}

#[test]
fn generic_socket_address_formats_match_ip_offers() {
    let mut o = offer();
    o.addr_format = FI_SOCKADDR_IN;
    for (user, ok) in [(FI_SOCKADDR, true), (FI_SOCKADDR_IP, true), (FI_SOCKADDR_IN, true), (FI_SOCKADDR_IN6, false), (FI_SOCKADDR_IB, false), (FI_ADDR_STR, false)] {
        let mut h = hints();
        h.addr_format = user;
        assert_eq!(check("p", &o, &h, V).is_ok(), ok, "IPv4 offer, hints format {user}");
    }
    o.addr_format = FI_SOCKADDR_IB;
    for (user, ok) in [(FI_SOCKADDR, true), (FI_SOCKADDR_IP, false), (FI_SOCKADDR_IB, true)] {
        let mut h = hints();
        h.addr_format = user;
        assert_eq!(check("p", &o, &h, V).is_ok(), ok, "IB offer, hints format {user}");
    }
    // FI_ADDR_STR offers (shm) match only FI_ADDR_STR or unspecified.
    let mut h = hints();
    h.addr_format = FI_SOCKADDR;
    assert!(check("p", &offer(), &h, V).is_err());
}

#[test]
fn shared_contexts_only_where_the_domain_has_them() {
    let mut h = hints();
    h.ep_attr.as_mut().unwrap().tx_ctx_cnt = FI_SHARED_CONTEXT;
    assert!(check("p", &offer(), &h, V).unwrap_err().0.contains("tx_ctx_cnt"));
    let mut o = offer();
    o.domain_attr.as_mut().unwrap().max_ep_stx_ctx = 1;
    assert!(check("p", &o, &h, V).is_ok());
    let mut h = hints();
    h.ep_attr.as_mut().unwrap().rx_ctx_cnt = FI_SHARED_CONTEXT;
    assert!(check("p", &o, &h, V).unwrap_err().0.contains("rx_ctx_cnt"));
    o.domain_attr.as_mut().unwrap().max_ep_srx_ctx = 1;
    assert!(check("p", &o, &h, V).is_ok());
}
