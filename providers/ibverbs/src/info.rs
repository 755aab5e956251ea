//! What `Verbs::devices` reports, in Rust terms.
#![forbid(unsafe_code)]

use crate::error::VerbsError;
use crate::sys::*;

/// `enum ibv_node_type`
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeType {
    Unknown,
    Ca,
    Switch,
    Router,
    Rnic,
    Usnic,
    UsnicUdp,
    Unspecified,
    Other(i32),
}

impl NodeType {
    pub fn from_raw(v: i32) -> NodeType {
        match v {
            IBV_NODE_UNKNOWN => NodeType::Unknown,
            IBV_NODE_CA => NodeType::Ca,
            IBV_NODE_SWITCH => NodeType::Switch,
            IBV_NODE_ROUTER => NodeType::Router,
            IBV_NODE_RNIC => NodeType::Rnic,
            IBV_NODE_USNIC => NodeType::Usnic,
            IBV_NODE_USNIC_UDP => NodeType::UsnicUdp,
            IBV_NODE_UNSPECIFIED => NodeType::Unspecified,
            v => NodeType::Other(v),
        }
    }
}

/// `enum ibv_transport_type`
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Unknown,
    Ib,
    Iwarp,
    Usnic,
    UsnicUdp,
    Unspecified,
    Other(i32),
}

impl Transport {
    pub fn from_raw(v: i32) -> Transport {
        match v {
            IBV_TRANSPORT_UNKNOWN => Transport::Unknown,
            IBV_TRANSPORT_IB => Transport::Ib,
            IBV_TRANSPORT_IWARP => Transport::Iwarp,
            IBV_TRANSPORT_USNIC => Transport::Usnic,
            IBV_TRANSPORT_USNIC_UDP => Transport::UsnicUdp,
            IBV_TRANSPORT_UNSPECIFIED => Transport::Unspecified,
            v => Transport::Other(v),
        }
    }
}

/// `enum ibv_port_state`
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortState {
    Nop,
    Down,
    Init,
    Armed,
    Active,
    ActiveDefer,
    Other(u32),
}

impl PortState {
    pub fn from_raw(v: u32) -> PortState {
        match v {
            IBV_PORT_NOP => PortState::Nop,
            IBV_PORT_DOWN => PortState::Down,
            IBV_PORT_INIT => PortState::Init,
            IBV_PORT_ARMED => PortState::Armed,
            IBV_PORT_ACTIVE => PortState::Active,
            IBV_PORT_ACTIVE_DEFER => PortState::ActiveDefer,
            v => PortState::Other(v),
        }
    }
}

/// `IBV_LINK_LAYER_*`
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkLayer {
    Unspecified,
    InfiniBand,
    Ethernet,
    Other(u8),
}

impl LinkLayer {
    pub fn from_raw(v: u8) -> LinkLayer {
        match v {
            IBV_LINK_LAYER_UNSPECIFIED => LinkLayer::Unspecified,
            IBV_LINK_LAYER_INFINIBAND => LinkLayer::InfiniBand,
            IBV_LINK_LAYER_ETHERNET => LinkLayer::Ethernet,
            v => LinkLayer::Other(v),
        }
    }
}

/// `enum ibv_mtu`
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mtu {
    M256,
    M512,
    M1024,
    M2048,
    M4096,
    Other(u32),
}

impl Mtu {
    pub fn from_raw(v: u32) -> Mtu {
        match v {
            IBV_MTU_256 => Mtu::M256,
            IBV_MTU_512 => Mtu::M512,
            IBV_MTU_1024 => Mtu::M1024,
            IBV_MTU_2048 => Mtu::M2048,
            IBV_MTU_4096 => Mtu::M4096,
            v => Mtu::Other(v),
        }
    }

    /// The MTU in bytes (`None` for a value this crate does not name).
    pub fn bytes(self) -> Option<u32> {
        match self {
            Mtu::M256 => Some(256),
            Mtu::M512 => Some(512),
            Mtu::M1024 => Some(1024),
            Mtu::M2048 => Some(2048),
            Mtu::M4096 => Some(4096),
            Mtu::Other(_) => None,
        }
    }
}

/// One port of a device (`ibv_query_port` and `ibv_query_gid(port, 0)`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortInfo {
    /// 1-based, as verbs numbers ports.
    pub port: u8,
    pub state: PortState,
    pub link_layer: LinkLayer,
    pub active_mtu: Mtu,
    pub max_mtu: Mtu,
    pub lid: u16,
    /// GID index 0, or why it could not be read.
    pub gid0: Result<[u8; 16], VerbsError>,
}

/// `efadv_query_device`'s answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EfaInfo {
    pub max_sq_wr: u32,
    pub max_rq_wr: u32,
    pub max_sq_sge: u16,
    pub max_rq_sge: u16,
    pub inline_buf_size: u16,
    /// `EFADV_DEVICE_ATTR_CAPS_*`
    pub device_caps: u32,
    pub max_rdma_size: u32,
}

impl From<&efadv_device_attr> for EfaInfo {
    fn from(a: &efadv_device_attr) -> Self {
        EfaInfo {
            max_sq_wr: a.max_sq_wr,
            max_rq_wr: a.max_rq_wr,
            max_sq_sge: a.max_sq_sge,
            max_rq_sge: a.max_rq_sge,
            inline_buf_size: a.inline_buf_size,
            device_caps: a.device_caps,
            max_rdma_size: a.max_rdma_size,
        }
    }
}

/// What an opened device says about itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceDetail {
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub fw_ver: String,
    pub phys_port_cnt: u8,
    /// `efadv_query_device`, when libefa is loaded and accepts the device.
    pub efa: Option<EfaInfo>,
    /// Ports 1..=phys_port_cnt, each or why it could not be queried.
    pub ports: Vec<Result<PortInfo, VerbsError>>,
}

/// One entry of `ibv_get_device_list`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    pub name: String,
    pub node_type: NodeType,
    pub transport: Transport,
    /// The kernel driver bound to the device (`<ibdev_path>/device/driver`
    /// in sysfs), when it can be read.
    pub driver: Option<String>,
    /// Opening and querying it, or why that failed.
    pub detail: Result<DeviceDetail, VerbsError>,
}

impl DeviceInfo {
    /// An EFA device: libefa's `efadv_query_device` accepted it, or its
    /// kernel driver is `efa`.
    pub fn is_efa(&self) -> bool {
        self.driver.as_deref() == Some("efa") || matches!(&self.detail, Ok(d) if d.efa.is_some())
    }
}
