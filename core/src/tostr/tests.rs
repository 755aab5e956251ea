use super::*;
use std::ffi::CString;
use std::ptr::null;

fn s<T>(v: &T, ty: u32) -> String {
    // SAFETY: `v` is a valid value of the type `ty` names in every call below.
    unsafe { tostr(v as *const T as *const c_void, ty) }
}

#[test]
fn view_sizes_match_layout_table() {
    let table = include_str!("../../../tests/abi/layout.tsv");
    let size_of = |ty: &str| -> usize {
        let row = table
            .lines()
            .find(|l| l.starts_with(&format!("struct {ty}\t(sizeof)")))
            .unwrap_or_else(|| panic!("{ty} not in layout.tsv"));
        row.split('\t').nth(3).unwrap().parse().unwrap()
    };
    use std::mem::size_of as sz;
    assert_eq!(sz::<fi_info>(), size_of("fi_info"));
    assert_eq!(sz::<fi_tx_attr>(), size_of("fi_tx_attr"));
    assert_eq!(sz::<fi_rx_attr>(), size_of("fi_rx_attr"));
    assert_eq!(sz::<fi_ep_attr>(), size_of("fi_ep_attr"));
    assert_eq!(sz::<fi_domain_attr>(), size_of("fi_domain_attr"));
    assert_eq!(sz::<fi_fabric_attr>(), size_of("fi_fabric_attr"));
    assert_eq!(sz::<fi_av_attr>(), size_of("fi_av_attr"));
    assert_eq!(sz::<fi_cq_attr>(), size_of("fi_cq_attr"));
    assert_eq!(sz::<fi_mr_attr>(), size_of("fi_mr_attr"));
    assert_eq!(sz::<fi_cntr_attr>(), size_of("fi_cntr_attr"));
    assert_eq!(sz::<fi_cq_err_entry>(), size_of("fi_cq_err_entry"));
    assert_eq!(sz::<fi_ops>(), size_of("fi_ops"));
    assert_eq!(std::mem::offset_of!(fi_domain_attr, max_group_id), 200);
    assert_eq!(std::mem::offset_of!(fi_mr_attr, iface), 64);
}

#[test]
fn flags_are_listed_in_upstream_order_and_unknown_bits_dropped() {
    assert_eq!(s(&(FI_SEND | FI_MSG | FI_TAGGED), FI_TYPE_CAPS), "FI_MSG, FI_TAGGED, FI_SEND");
    assert_eq!(s(&(1u64 << 62), FI_TYPE_CAPS), "");
    assert_eq!(s(&0u64, FI_TYPE_MODE), "");
    assert_eq!(s(&(FI_CONTEXT | FI_CONTEXT2), FI_TYPE_MODE), "FI_CONTEXT, FI_CONTEXT2");
    assert_eq!(s(&(FI_XPU | FI_HMEM), FI_TYPE_CAPS), "FI_HMEM, FI_XPU");
    assert_eq!(s(&(FI_INJECT | FI_COMPLETION), FI_TYPE_OP_FLAGS), "FI_COMPLETION, FI_INJECT");
}

#[test]
fn enums_and_unknown_values() {
    assert_eq!(s(&FI_EP_RDM, FI_TYPE_EP_TYPE), "FI_EP_RDM");
    assert_eq!(s(&77u32, FI_TYPE_EP_TYPE), "Unknown");
    assert_eq!(s(&FI_SOCKADDR_IN, FI_TYPE_ADDR_FORMAT), "FI_SOCKADDR_IN");
    assert_eq!(s(&0x8000_0001u32, FI_TYPE_ADDR_FORMAT), "Provider specific");
    assert_eq!(s(&FI_PROTO_SHM, FI_TYPE_PROTOCOL), "FI_PROTO_SHM");
    assert_eq!(s(&FI_LOG_INFO, FI_TYPE_LOG_LEVEL), "info");
    assert_eq!(s(&4u32, FI_TYPE_LOG_LEVEL), "Unknown");
    assert_eq!(s(&FI_LOG_CNTR, FI_TYPE_LOG_SUBSYS), "cntr");
    assert_eq!(s(&FI_WAIT_FD, FI_TYPE_WAIT_OBJ), "FI_WAIT_FD");
    assert_eq!(s(&0u32, 9999), "Unknown type");
}

#[test]
fn null_data_gives_empty_text() {
    // SAFETY: NULL is allowed.
    assert_eq!(unsafe { tostr(null(), FI_TYPE_INFO) }, "");
}

#[test]
fn tx_attr_text_and_truncation() {
    let a = fi_tx_attr {
        caps: FI_MSG,
        mode: 0,
        op_flags: 0,
        msg_order: FI_ORDER_SAS,
        comp_order: FI_ORDER_NONE,
        inject_size: 64,
        size: 1024,
        iov_limit: 4,
        rma_iov_limit: 1,
        tclass: 0,
    };
    let full = s(&a, FI_TYPE_TX_ATTR);
    let want = "fi_tx_attr:\n    caps: [ FI_MSG ]\n    mode: [  ]\n    op_flags: [  ]\n    \
                msg_order: [ FI_ORDER_SAS ]\n    comp_order: [ FI_ORDER_NONE ]\n    \
                inject_size: 64\n    size: 1024\n    iov_limit: 4\n    rma_iov_limit: 1\n    \
                tclass: 0x0\n";
    assert_eq!(full, want);
    for cap in [1usize, 2, 3, 10, 40] {
        // SAFETY: `a` is a valid fi_tx_attr.
        let t = unsafe { tostr_bytes(&a as *const _ as *const c_void, FI_TYPE_TX_ATTR, Some(cap)) };
        assert_eq!(t, &want.as_bytes()[..cap.saturating_sub(2)], "cap {cap}");
    }
}

#[test]
fn info_with_null_members_and_address() {
    let name = CString::new("lo").unwrap();
    // SAFETY: sockaddr_in is plain integers; all zero is valid.
    let mut sin: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    sin.sin_family = libc::AF_INET as u16;
    sin.sin_port = 4242u16.to_be();
    sin.sin_addr.s_addr = u32::from_be_bytes([127, 0, 0, 1]).to_be();
    let mut fabric = fi_fabric_attr {
        fabric: std::ptr::null_mut(),
        name: name.as_ptr() as *mut c_char,
        prov_name: std::ptr::null_mut(),
        prov_version: fi_version(1, 2),
        api_version: fi_version(2, 0),
    };
    // SAFETY: all-zero is a valid fi_info (NULL pointers, zero numbers).
    let mut info: fi_info = unsafe { std::mem::zeroed() };
    info.addr_format = FI_SOCKADDR_IN;
    info.src_addr = &mut sin as *mut _ as *mut c_void;
    info.fabric_attr = &mut fabric;
    let t = s(&info, FI_TYPE_INFO);
    assert!(t.starts_with("fi_info:\n    caps: [  ]\n"), "{t}");
    assert!(t.contains("    src_addr: fi_sockaddr_in://127.0.0.1:4242\n    dest_addr: (null)\n"), "{t}");
    assert!(t.contains("    handle: (nil)\n    fi_tx_attr: (null)\n"), "{t}");
    assert!(t.contains("        name: lo\n        prov_name: (null)\n        prov_version: 1.2\n"), "{t}");
    assert!(t.ends_with("api_version: 2.0\n    nic: (nil)\n"), "{t}");
}

#[test]
fn strerror_messages() {
    assert_eq!(strerror(FI_EAGAIN), "Resource temporarily unavailable");
    assert_eq!(strerror(0), "Success");
    assert_eq!(strerror(FI_ETRUNC), "Truncation error");
    assert_eq!(strerror(FI_EOTHER), "Unspecified error");
    assert_eq!(strerror(5000), "Unspecified error");
    assert_eq!(strerror(200), "Unknown error 200");
    // The same static string every time.
    assert!(std::ptr::eq(strerror(200), strerror(200)));
}
