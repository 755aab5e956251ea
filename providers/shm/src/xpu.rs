//! shm's host XPU (`fi_xpu(3)`, `FI_HMEM_SYSTEM`): what `fi_getinfo`
//! reports, and the name its contexts carry. The queues, callbacks and
//! proxy are `rfabric_core::xpu`.
#![forbid(unsafe_code)]

use rfabric_core::abi::*;
use rfabric_core::info::Info;
use rfabric_core::provider::Request;

/// What shm's XPU contexts carry: its name in their log lines, and the
/// `fid_xpu.prov_id` that `<rdma/fi_xpu_device.h>` dispatches on.
pub const PROVIDER: rfabric_core::xpu::XpuProvider = rfabric_core::xpu::XpuProvider { name: "shm", prov_id: FI_XPU_PROV_SHM };

/// XPU contexts one domain may hold.
pub const MAX_XPU_CTX: usize = 16;

/// `FI_XPU` and `max_xpu_ctx_cnt` stay in an answer only when the
/// application asked for `FI_XPU`: everyone else sees the plain provider.
pub fn resolve(offer: &mut Info, req: &Request<'_>) {
    let asked = req.hints.is_some_and(|h| h.caps & FI_XPU != 0 || h.domain_attr.as_ref().is_some_and(|d| d.max_xpu_ctx_cnt > 0));
    if !asked {
        offer.caps &= !FI_XPU;
        if let Some(d) = offer.domain_attr.as_mut() {
            d.max_xpu_ctx_cnt = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rfabric_core::provider::Provider;

    fn answer(hints: Option<&Info>) -> Info {
        let req = Request { version: fi_version(2, 8), node: None, service: None, flags: 0, hints };
        let offer = crate::provider::ShmProvider.offers().remove(0);
        crate::provider::ShmProvider.resolve(offer, &req).unwrap()
    }

    #[test]
    fn xpu_only_when_asked() {
        let plain = answer(None);
        assert_eq!(plain.caps & FI_XPU, 0);
        assert_eq!(plain.domain_attr.unwrap().max_xpu_ctx_cnt, 0);
        let hints = Info { caps: FI_XPU | FI_TAGGED, ..Info::default() };
        let x = answer(Some(&hints));
        assert_ne!(x.caps & FI_XPU, 0);
        assert_eq!(x.domain_attr.unwrap().max_xpu_ctx_cnt, MAX_XPU_CTX);
    }
}
