//! The provider table: built-in Rust providers and DL providers
//! (`lib<name>-fi.so`, upstream's provider ABI), filtered by `FI_PROVIDER`.

use crate::dl::DlProvider;
use crate::error::{Result, ENOSYS};
use crate::info::{FabricAttr, Info};
use crate::objects::cq::{CqAttr, CqErrInfo};
pub use crate::objects::eq::{ConnReq, EqBinding};
pub use crate::objects::local_mr::Descs;
use crate::objects::local_mr::{Dmabuf, LocalMr};
use crate::xpu::{XpuAttr, XpuCtx};
use once_cell::sync::OnceCell;
use std::any::Any;
use std::sync::Arc;

/// What an application asked `fi_getinfo` for.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    pub version: u32,
    pub node: Option<&'a str>,
    pub service: Option<&'a str>,
    pub flags: u64,
    pub hints: Option<&'a Info>,
}

/// A fabric object created by a built-in provider. Its operations are
/// reached through the ops tables that `capi` builds around it.
pub trait Fabric: Send + Sync + std::any::Any {
    fn as_any(&self) -> &dyn std::any::Any;
    /// `fi_domain`: open a domain for an `Info` this provider returned.
    ///
    /// # Safety
    /// `info.domain_attr.threading` is a promise about how the domain's
    /// objects will be called (fi_domain(3)), which a provider may rely on
    /// for memory safety (shm takes no locks under `FI_THREAD_DOMAIN` and
    /// `FI_THREAD_COMPLETION`): the caller keeps it for every object opened
    /// under the domain. `capi`'s `fi_domain` passes on the application's.
    unsafe fn domain(&self, _info: &Info) -> Result<Box<dyn Domain>> {
        Err(ENOSYS)
    }
    /// `fi_passive_ep`: a listening endpoint for an `FI_EP_MSG` info.
    fn passive_ep(&self, _info: &Info) -> Result<Box<dyn PassiveEndpoint>> {
        Err(ENOSYS)
    }
}

/// A passive endpoint (`fid_pep`, fi_endpoint(3)): it listens for
/// connection requests and reports each as an `FI_CONNREQ` event on its
/// EQ, whose info's `handle` is the provider's [`ConnReq`]; the application
/// answers with an endpoint opened on that info ([`Domain::accept_endpoint`]
/// and [`Endpoint::accept`]) or with [`PassiveEndpoint::reject`].
pub trait PassiveEndpoint: Send + Sync {
    /// `fi_pep_bind` to an EQ (the only object a passive endpoint binds).
    fn bind_eq(&self, _eq: &EqBinding, _flags: u64) -> Result<()> {
        Err(ENOSYS)
    }
    /// `fi_listen`; `-FI_ENOEQ` without a bound EQ.
    fn listen(&self) -> Result<()> {
        Err(ENOSYS)
    }
    /// `fi_reject`: refuses a request of this endpoint, sending `data` (the
    /// peer sees it as the `err_data` of its `FI_ECONNREFUSED` event).
    fn reject(&self, _req: ConnReq, _data: &[u8]) -> Result<()> {
        Err(ENOSYS)
    }
    /// `fi_getname`: copies what fits, returns the full length.
    fn getname(&self, _buf: &mut [u8]) -> Result<usize> {
        Err(ENOSYS)
    }
    fn setname(&self, _addr: &[u8]) -> Result<()> {
        Err(ENOSYS)
    }
    fn getopt(&self, _level: i32, _name: i32, _buf: &mut [u8]) -> Result<usize> {
        Err(ENOSYS)
    }
    fn setopt(&self, _level: i32, _name: i32, _val: &[u8]) -> Result<()> {
        Err(ENOSYS)
    }
    /// Stops listening; called once by `fi_close`.
    fn close(&self) -> Result<()> {
        Ok(())
    }
}

/// `fi_av_attr` as the provider sees it.
#[derive(Clone, Copy, Debug, Default)]
pub struct AvAttr {
    pub kind: u32,
    pub count: usize,
    pub flags: u64,
}

/// `fi_mr_reg`: one registered range.
#[derive(Clone, Copy, Debug, Default)]
pub struct MrReq {
    pub addr: usize,
    pub len: usize,
    pub access: u64,
    pub offset: u64,
    pub requested_key: u64,
    pub flags: u64,
    /// `FI_MR_DMABUF`: the range is this dma-buf (`addr` and `len` are 0,
    /// `flags` without `FI_MR_DMABUF`).
    pub dmabuf: Option<Dmabuf>,
}

/// What `Domain::mr_reg` registered.
#[derive(Debug)]
pub struct MrReg {
    pub key: u64,
    /// The local side, whose address `fi_mr_desc` hands out; `None` gives
    /// the application NULL descriptors.
    pub local: Option<Box<LocalMr>>,
}

/// A domain of a built-in provider. Every operation a provider does not
/// implement answers `ENOSYS`, which the application sees as `-FI_ENOSYS`.
pub trait Domain: Send + Sync {
    fn endpoint(&self, _info: &Info) -> Result<Box<dyn Endpoint>> {
        Err(ENOSYS)
    }
    /// `fi_endpoint` with the info of an `FI_CONNREQ` event: the endpoint
    /// that `fi_accept` will connect through `req`.
    fn accept_endpoint(&self, _info: &Info, _req: ConnReq) -> Result<Box<dyn Endpoint>> {
        Err(ENOSYS)
    }
    /// `fi_srx_context`: a shared receive context, an endpoint whose
    /// receives (`Endpoint::recv`) serve every endpoint bound to it
    /// (`Bind::Srx`).
    fn srx_context(&self, _attr: &crate::abi::fi_rx_attr) -> Result<Box<dyn Endpoint>> {
        Err(ENOSYS)
    }
    fn cq_open(&self, _attr: &CqAttr) -> Result<Arc<dyn CompletionQueue>> {
        Err(ENOSYS)
    }
    fn av_open(&self, _attr: &AvAttr) -> Result<Arc<dyn AddressVector>> {
        Err(ENOSYS)
    }
    /// `fi_cntr_open` with `fi_cntr_attr.events` and `.wait_obj`.
    fn cntr_open(&self, _events: u32, _wait_obj: u32) -> Result<Arc<dyn Counter>> {
        Err(ENOSYS)
    }
    /// Registers a range: its key and the local side of the registration.
    fn mr_reg(&self, _req: &MrReq) -> Result<MrReg> {
        Err(ENOSYS)
    }
    fn mr_close(&self, _key: u64) -> Result<()> {
        Err(ENOSYS)
    }
    /// `fi_xpu_ctx`: a context for one XPU of this domain's provider
    /// (`crate::xpu::XpuCtx::open` serves providers whose XPU is the host).
    fn xpu_ctx(&self, _attr: &XpuAttr) -> Result<Arc<XpuCtx>> {
        Err(ENOSYS)
    }
    /// `fi_query_atomic`: `(count, size)` of `op` on `datatype` issued
    /// through the `kind` family (`FI_FETCH_ATOMIC` / `FI_COMPARE_ATOMIC`).
    fn query_atomic(&self, _kind: AtomicKind, _op: u32, _datatype: u32) -> Result<(usize, usize)> {
        Err(ENOSYS)
    }
}

/// A completion queue. `read` drives the provider's progress when the
/// domain uses `FI_PROGRESS_MANUAL`.
pub trait CompletionQueue: Send + Sync {
    /// Bytes of one entry in the CQ's format.
    fn entry_size(&self) -> usize;
    /// `fi_cq_read` / `fi_cq_readfrom` (`src` holds `count` values).
    fn read(&self, out: &mut [u8], count: usize, src: Option<&mut [u64]>) -> Result<usize>;
    /// `fi_cq_readerr`. When the result says `ErrDataLoc::Provider`, the
    /// second value is the address of the error data, valid until the next
    /// `readerr`.
    fn readerr(&self, user_buf: Option<&mut [u8]>, api_version: u32) -> Result<(CqErrInfo, usize)>;
    /// `fi_cq_sread` / `fi_cq_sreadfrom`; timeout in ms, negative = forever.
    fn sread(&self, _out: &mut [u8], _count: usize, _src: Option<&mut [u64]>, _timeout: i32) -> Result<usize> {
        Err(ENOSYS)
    }
    fn signal(&self) -> Result<()> {
        Err(ENOSYS)
    }
    /// `fi_control(FI_GETWAIT)`: the fd of an `FI_WAIT_FD` queue.
    fn wait_fd(&self) -> Option<i32> {
        None
    }
    /// `fi_trywait`: `EAGAIN` when entries are ready (after driving
    /// progress), otherwise arms the wait object so the fd turns readable
    /// on the next completion.
    fn trywait(&self) -> Result<()> {
        Err(ENOSYS)
    }
    /// The object itself, for the provider's `Endpoint::bind` to downcast.
    fn as_any_arc(self: Arc<Self>) -> Arc<dyn Any + Send + Sync>;
}

/// A completion counter. `read` and `wait` drive manual progress.
pub trait Counter: Send + Sync {
    fn read(&self) -> u64;
    fn readerr(&self) -> u64;
    fn add(&self, v: u64) -> Result<()>;
    fn set(&self, v: u64) -> Result<()>;
    fn adderr(&self, v: u64) -> Result<()>;
    fn seterr(&self, v: u64) -> Result<()>;
    /// `fi_cntr_wait`: until the value reaches `threshold` (timeout in ms,
    /// negative = forever).
    fn wait(&self, _threshold: u64, _timeout: i32) -> Result<()> {
        Err(ENOSYS)
    }
    /// `fi_control(FI_GETWAIT)`: the fd of an `FI_WAIT_FD` counter.
    fn wait_fd(&self) -> Option<i32> {
        None
    }
    /// `fi_trywait` on a counter (see `CompletionQueue::trywait`).
    fn trywait(&self) -> Result<()> {
        Err(ENOSYS)
    }
    fn as_any_arc(self: Arc<Self>) -> Arc<dyn Any + Send + Sync>;
}

/// An address vector.
pub trait AddressVector: Send + Sync {
    /// Fixed address length, or `None` for NUL-terminated strings
    /// (`FI_ADDR_STR`).
    fn addr_len(&self) -> Option<usize>;
    /// `fi_av_insert`: one slice per address.
    fn insert(&self, addrs: &[&[u8]], fi_addr: Option<&mut [u64]>, flags: u64) -> Result<usize>;
    fn remove(&self, fi_addrs: &[u64], flags: u64) -> Result<()>;
    /// `fi_av_lookup`: copies what fits, returns the full length.
    fn lookup(&self, fi_addr: u64, buf: &mut [u8]) -> Result<usize>;
    /// `fi_av_straddr`: printable form of an address in the AV's format.
    fn straddr(&self, addr: &[u8]) -> String;
    fn as_any_arc(self: Arc<Self>) -> Arc<dyn Any + Send + Sync>;
}

/// What `fi_ep_bind` attaches.
pub enum Bind<'a> {
    Cq(&'a Arc<dyn CompletionQueue>),
    Av(&'a Arc<dyn AddressVector>),
    Cntr(&'a Arc<dyn Counter>),
    Eq(&'a EqBinding),
    /// A shared receive context of `Domain::srx_context` (the provider's
    /// own object: it downcasts `Endpoint::as_any`).
    Srx(&'a dyn Endpoint),
}

/// One buffer of an operation: application memory, by address.
#[derive(Clone, Copy, Debug, Default)]
pub struct Iov {
    pub base: usize,
    pub len: usize,
}

/// The pieces of the buffers `iov` that hold bytes `skip..skip + len` of
/// their concatenation, in order; fewer bytes when `iov` ends first. The
/// one walk over an operation's buffers from an offset: gathers into
/// packets and scatters out of them take their pieces here.
pub fn iov_pieces(iov: &[Iov], skip: usize, len: usize) -> IovPieces<'_> {
    IovPieces { iov: iov.iter(), skip, left: len }
}

/// What [`iov_pieces`] returns.
pub struct IovPieces<'a> {
    iov: std::slice::Iter<'a, Iov>,
    skip: usize,
    left: usize,
}

impl Iterator for IovPieces<'_> {
    type Item = Iov;
    fn next(&mut self) -> Option<Iov> {
        while self.left > 0 {
            let v = self.iov.next()?;
            if self.skip >= v.len {
                self.skip -= v.len;
                continue;
            }
            let take = (v.len - self.skip).min(self.left);
            let piece = Iov { base: v.base.wrapping_add(self.skip), len: take };
            self.skip = 0;
            self.left -= take;
            return Some(piece);
        }
        None
    }
}

/// A send in all its forms (`fi_send`, `fi_sendv`, `fi_sendmsg`,
/// `fi_inject`, `fi_senddata`, and the tagged ones).
#[derive(Clone, Copy, Debug)]
pub struct TxOp<'a> {
    pub iov: &'a [Iov],
    /// The application's descriptors for `iov` (see `objects::local_mr`).
    pub desc: Descs,
    pub dest: u64,
    pub context: usize,
    pub tag: u64,
    pub data: u64,
    /// `FI_REMOTE_CQ_DATA`, `FI_INJECT`, `FI_COMPLETION`, ...
    pub flags: u64,
    pub tagged: bool,
    /// `fi_inject*`: no completion is generated.
    pub no_completion: bool,
}

/// A receive (`fi_recv`, `fi_recvv`, `fi_recvmsg`, `fi_trecv*`).
#[derive(Clone, Copy, Debug)]
pub struct RxOp<'a> {
    pub iov: &'a [Iov],
    /// The application's descriptors for `iov` (see `objects::local_mr`).
    pub desc: Descs,
    pub src: u64,
    pub context: usize,
    pub tag: u64,
    pub ignore: u64,
    pub flags: u64,
    pub tagged: bool,
}

/// One remote buffer (`struct fi_rma_iov`; for atomics `struct fi_rma_ioc`,
/// where `len` counts elements).
#[derive(Clone, Copy, Debug, Default)]
pub struct RmaIov {
    pub addr: u64,
    pub len: usize,
    pub key: u64,
}

/// An RMA read or write in all its forms (`fi_read*`, `fi_write*`,
/// `fi_writedata`, `fi_inject_write*`).
#[derive(Clone, Copy, Debug)]
pub struct RmaOp<'a> {
    /// Local buffers.
    pub iov: &'a [Iov],
    /// The application's descriptors for `iov` (see `objects::local_mr`).
    pub desc: Descs,
    pub rma: &'a [RmaIov],
    pub dest: u64,
    pub context: usize,
    pub data: u64,
    /// `FI_REMOTE_CQ_DATA`, `FI_INJECT`, `FI_COMPLETION`, ...
    pub flags: u64,
    /// `fi_inject_write*`: no completion is generated.
    pub no_completion: bool,
}

pub use crate::objects::atomic::Kind as AtomicKind;

/// An atomic operation (`fi_atomic*`, `fi_fetch_atomic*`,
/// `fi_compare_atomic*`). Local buffers are in bytes (count x type size).
#[derive(Clone, Copy, Debug)]
pub struct AtomicOp<'a> {
    pub kind: AtomicKind,
    pub op: u32,
    pub datatype: u32,
    pub iov: &'a [Iov],
    /// Compare operands (`Compare` only).
    pub compare: &'a [Iov],
    /// Where previous values go (`Fetch` and `Compare`).
    pub result: &'a [Iov],
    /// The application's descriptors for `result` (`Descs::NONE` when the
    /// call has none).
    pub result_desc: Descs,
    pub rma: &'a [RmaIov],
    pub dest: u64,
    pub context: usize,
    pub data: u64,
    pub flags: u64,
    pub no_completion: bool,
}

/// An endpoint. Data-path methods are `unsafe`: the buffers they name are
/// application memory that must stay valid until the operation completes
/// (for `FI_INJECT` sends: until the call returns).
pub trait Endpoint: Send + Sync {
    /// The object itself, for a provider to recognise its own endpoints
    /// (a shared receive context bound with `Bind::Srx`); `None` unless
    /// the provider needs it.
    fn as_any(&self) -> Option<&dyn Any> {
        None
    }
    fn bind(&self, _target: Bind<'_>, _flags: u64) -> Result<()> {
        Err(ENOSYS)
    }
    fn enable(&self) -> Result<()> {
        Err(ENOSYS)
    }
    /// `fi_getname`: copies what fits, returns the full length.
    fn getname(&self, _buf: &mut [u8]) -> Result<usize> {
        Err(ENOSYS)
    }
    fn setname(&self, _addr: &[u8]) -> Result<()> {
        Err(ENOSYS)
    }
    /// `fi_getpeer`: copies what fits, returns the full length.
    fn getpeer(&self, _buf: &mut [u8]) -> Result<usize> {
        Err(ENOSYS)
    }
    /// `fi_connect` to `addr` (in the endpoint's address format) with
    /// connection data; the result arrives on the bound EQ
    /// (`FI_CONNECTED`, or an error event).
    fn connect(&self, _addr: &[u8], _data: &[u8]) -> Result<()> {
        Err(ENOSYS)
    }
    /// `fi_accept` on an endpoint opened with [`Domain::accept_endpoint`].
    fn accept(&self, _data: &[u8]) -> Result<()> {
        Err(ENOSYS)
    }
    /// `fi_shutdown`.
    fn shutdown(&self, _flags: u64) -> Result<()> {
        Err(ENOSYS)
    }
    /// # Safety
    /// Every `iov` of `op` is readable until the send completes.
    unsafe fn send(&self, _op: &TxOp<'_>) -> Result<()> {
        Err(ENOSYS)
    }
    /// # Safety
    /// Every `iov` of `op` is writable until the receive completes.
    unsafe fn recv(&self, _op: &RxOp<'_>) -> Result<()> {
        Err(ENOSYS)
    }
    /// `fi_read*`.
    ///
    /// # Safety
    /// Every local buffer is writable until the operation completes.
    unsafe fn rma_read(&self, _op: &RmaOp<'_>) -> Result<()> {
        Err(ENOSYS)
    }
    /// `fi_write*`, `fi_inject_write*`.
    ///
    /// # Safety
    /// Every local buffer is readable until the operation completes (for
    /// injects: until the call returns).
    unsafe fn rma_write(&self, _op: &RmaOp<'_>) -> Result<()> {
        Err(ENOSYS)
    }
    /// `fi_atomic*`, `fi_fetch_atomic*`, `fi_compare_atomic*`.
    ///
    /// # Safety
    /// Operand and compare buffers are readable, result buffers writable,
    /// until the operation completes.
    unsafe fn atomic(&self, _op: &AtomicOp<'_>) -> Result<()> {
        Err(ENOSYS)
    }
    /// `fi_atomicvalid` and friends: the largest element count.
    fn atomic_valid(&self, _kind: AtomicKind, _op: u32, _datatype: u32) -> Result<usize> {
        Err(ENOSYS)
    }
    /// `fi_cancel` of the operation with this context.
    fn cancel(&self, _context: usize) -> Result<()> {
        Err(ENOSYS)
    }
    fn getopt(&self, _level: i32, _name: i32, _buf: &mut [u8]) -> Result<usize> {
        Err(ENOSYS)
    }
    fn setopt(&self, _level: i32, _name: i32, _val: &[u8]) -> Result<()> {
        Err(ENOSYS)
    }
    /// Detach from bound objects; called once by `fi_close`.
    fn close(&self) -> Result<()> {
        Ok(())
    }
}

/// A built-in provider.
pub trait Provider: Send + Sync {
    fn name(&self) -> &'static str;
    /// `FI_VERSION(major, minor)` of the provider itself.
    fn version(&self) -> u32;
    /// Everything the provider offers, one `Info` per distinct
    /// configuration, fully filled in (the "provider info" list).
    fn offers(&self) -> Vec<Info>;
    /// Fit an offer that passed matching to the request: addresses from
    /// node/service, attributes the application asked for within what the
    /// provider can do. The default keeps the offer as it is.
    fn resolve(&self, offer: Info, _req: &Request<'_>) -> Result<Info> {
        Ok(offer)
    }
    /// Open a fabric for an `fi_fabric_attr` that this provider returned.
    fn fabric(&self, attr: &FabricAttr) -> Result<Box<dyn Fabric>>;
}

pub enum Entry {
    Builtin(Box<dyn Provider>),
    Dl(DlProvider),
}

impl Entry {
    pub fn name(&self) -> &str {
        match self {
            Entry::Builtin(p) => p.name(),
            Entry::Dl(d) => d.name(),
        }
    }
    pub fn version(&self) -> u32 {
        match self {
            Entry::Builtin(p) => p.version(),
            Entry::Dl(d) => d.version(),
        }
    }
}

/// The table, built once on first use.
pub struct Table {
    pub entries: Vec<Entry>,
}

static TABLE: OnceCell<Table> = OnceCell::new();

/// Build (once) and return the provider table. `builtins` is called only
/// the first time.
pub fn table(builtins: impl FnOnce() -> Vec<Box<dyn Provider>>) -> &'static Table {
    TABLE.get_or_init(|| {
        let filter = crate::params::provider_filter_from_env();
        let mut entries: Vec<Entry> = Vec::new();
        for p in builtins() {
            if !filter.excludes_at_init(p.name()) {
                entries.push(Entry::Builtin(p));
            } else {
                crate::fi_info!("core", crate::abi::FI_LOG_CORE, "provider {} excluded by FI_PROVIDER", p.name());
            }
        }
        for d in crate::dl::load_all(&crate::dl::search_path()) {
            if filter.excludes_at_init(d.name()) {
                crate::fi_info!("core", crate::abi::FI_LOG_CORE, "provider {} excluded by FI_PROVIDER", d.name());
                continue;
            }
            if let Some(i) = entries.iter().position(|e| e.name() == d.name()) {
                // Same name twice: the newer provider version wins, as users expect
                // when they drop a newer build into FI_PROVIDER_PATH.
                if d.version() > entries[i].version() {
                    crate::fi_info!("core", crate::abi::FI_LOG_CORE, "DL provider {} ({}) replaces the built-in one", d.name(), d.path().display());
                    entries[i] = Entry::Dl(d);
                } else {
                    crate::fi_info!("core", crate::abi::FI_LOG_CORE, "DL provider {} ({}) is not newer than the one loaded; skipped", d.name(), d.path().display());
                }
                continue;
            }
            entries.push(Entry::Dl(d));
        }
        Table { entries }
    })
}

/// Build the table from `providers` alone, for a library that is itself a
/// DL provider: its host loads the other providers and applies
/// `FI_PROVIDER`, so no DL provider is loaded here (this library would find
/// itself in `FI_PROVIDER_PATH`) and nothing is filtered. False, and the
/// table unchanged, when it was built before.
pub fn init_table_only(providers: Vec<Box<dyn Provider>>) -> bool {
    let mut fresh = false;
    TABLE.get_or_init(|| {
        fresh = true;
        Table { entries: providers.into_iter().map(Entry::Builtin).collect() }
    });
    fresh
}

/// A provider under another name: the DL build of a provider, loaded by a
/// libfabric that has a built-in provider of the first name, stays
/// selectable by its own name (`FI_PROVIDER`, `fi_getinfo` hints, the
/// `prov_name` of its `fi_info`). Everything else is the inner provider's.
pub struct Renamed {
    inner: Box<dyn Provider>,
    name: &'static str,
}

impl Renamed {
    pub fn new(inner: Box<dyn Provider>, name: &'static str) -> Renamed {
        Renamed { inner, name }
    }
}

impl Provider for Renamed {
    fn name(&self) -> &'static str {
        self.name
    }
    fn version(&self) -> u32 {
        self.inner.version()
    }
    /// The inner provider's offers, renamed, without `FI_EP_MSG`: the
    /// upstream library that loads a DL provider layers its `ofi_rxm` over
    /// every `FI_EP_MSG` offer and lists that `FI_EP_RDM` before the
    /// provider's own (Debian's `fi_pingpong -p rftcp -e rdm` took
    /// `rftcp;ofi_rxm`, whose domain failed with `-FI_ENODATA`).
    fn offers(&self) -> Vec<Info> {
        let mut offers = self.inner.offers();
        offers.retain(|o| o.ep_type() != crate::abi::FI_EP_MSG);
        for o in &mut offers {
            if let Some(f) = o.fabric_attr.as_mut() {
                f.prov_name = Some(self.name.to_string());
            }
        }
        offers
    }
    fn resolve(&self, offer: Info, req: &Request<'_>) -> Result<Info> {
        self.inner.resolve(offer, req)
    }
    fn fabric(&self, attr: &FabricAttr) -> Result<Box<dyn Fabric>> {
        self.inner.fabric(attr)
    }
}

/// The table if it has been built.
pub fn existing_table() -> Option<&'static Table> {
    TABLE.get()
}

#[cfg(test)]
mod iov_pieces_tests {
    use super::{iov_pieces, Iov};

    fn walk(iov: &[Iov], skip: usize, len: usize) -> Vec<(usize, usize)> {
        iov_pieces(iov, skip, len).map(|p| (p.base, p.len)).collect()
    }

    #[test]
    fn pieces_start_at_the_offset_and_stop_at_the_length_or_the_end() {
        let iov = [Iov { base: 1000, len: 10 }, Iov { base: 2000, len: 0 }, Iov { base: 3000, len: 5 }, Iov { base: 4000, len: 20 }];
        assert_eq!(walk(&iov, 0, 35), [(1000, 10), (3000, 5), (4000, 20)]);
        assert_eq!(walk(&iov, 4, 8), [(1004, 6), (3000, 2)]);
        assert_eq!(walk(&iov, 10, 5), [(3000, 5)], "an offset at a buffer's end starts at the next non-empty one");
        assert_eq!(walk(&iov, 12, 100), [(3002, 3), (4000, 20)], "the buffers end first");
        assert_eq!(walk(&iov, 35, 1), []);
        assert_eq!(walk(&iov, 3, 0), []);
        assert_eq!(walk(&[], 0, 8), []);
    }
}
