//! DL providers: `lib<name>-fi.so` files found in `FI_PROVIDER_PATH`
//! (default `<our libdir>/libfabric/`), opened with dlopen and entered through
//! `fi_prov_ini`, upstream's provider ABI.
//!
//! This is an FFI edge: everything a loaded library hands back is checked
//! before use, and a library that fails any check is skipped with a warning.

use crate::abi::{fi_provider, FI_LOG_CORE, FI_MAJOR_VERSION, FI_MINOR_VERSION};
use std::ffi::{CStr, OsStr};
use std::path::{Path, PathBuf};

/// The `struct fi_info` shape a DL provider was built against, which is the
/// shape of the lists it hands back. Read from the library's ELF version
/// needs (the newest `FABRIC_1.x` node it binds from libfabric.so.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct AbiNode(pub u32);

impl AbiNode {
    pub const CURRENT: AbiNode = AbiNode(10);
}

pub struct DlProvider {
    // Kept open for the life of the process: the provider's code and
    // function pointers must stay mapped.
    _lib: libloading::Library,
    prov: *const fi_provider,
    name: String,
    version: u32,
    fi_version: u32,
    path: PathBuf,
    abi: AbiNode,
}

// SAFETY: the provider struct is immutable after fi_prov_ini returned and
// upstream providers are entered from any thread through it.
unsafe impl Send for DlProvider {}
// SAFETY: as above; we only read through the pointer.
unsafe impl Sync for DlProvider {}

impl DlProvider {
    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn version(&self) -> u32 {
        self.version
    }
    pub fn fi_version(&self) -> u32 {
        self.fi_version
    }
    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn raw(&self) -> *const fi_provider {
        self.prov
    }
    pub fn abi(&self) -> AbiNode {
        self.abi
    }
}

/// The directories to search: `FI_PROVIDER_PATH` (colon separated) or the
/// `libfabric/` folder beside the library that holds this code.
pub fn search_path() -> Vec<PathBuf> {
    if let Some(p) = std::env::var_os("FI_PROVIDER_PATH") {
        return std::env::split_paths(&p).filter(|d| !d.as_os_str().is_empty()).collect();
    }
    match own_library_dir() {
        Some(dir) => vec![dir.join("libfabric")],
        None => Vec::new(),
    }
}

fn own_library_dir() -> Option<PathBuf> {
    let mut info: libc::Dl_info = unsafe_zeroed_dl_info();
    let addr = own_library_dir as *const libc::c_void;
    // SAFETY: dladdr only reads the loader's tables and fills `info`.
    let rc = unsafe { libc::dladdr(addr, &mut info) };
    if rc == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dli_fname is a NUL-terminated string owned by the loader.
    let fname = unsafe { CStr::from_ptr(info.dli_fname) };
    let path = PathBuf::from(std::ffi::OsStr::new(
        std::str::from_utf8(fname.to_bytes()).ok()?,
    ));
    let path = std::fs::canonicalize(&path).unwrap_or(path);
    path.parent().map(Path::to_path_buf)
}

fn unsafe_zeroed_dl_info() -> libc::Dl_info {
    libc::Dl_info {
        dli_fname: std::ptr::null(),
        dli_fbase: std::ptr::null_mut(),
        dli_sname: std::ptr::null(),
        dli_saddr: std::ptr::null_mut(),
    }
}

/// Load every `lib*-fi.so` in `dirs`, in directory order then name order.
pub fn load_all(dirs: &[PathBuf]) -> Vec<DlProvider> {
    let mut out = Vec::new();
    for dir in dirs {
        let rd = match std::fs::read_dir(dir) {
            Ok(rd) => rd,
            Err(e) => {
                crate::fi_info!("core", FI_LOG_CORE, "provider path {}: {}", dir.display(), e);
                continue;
            }
        };
        let mut files: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| is_dl_provider_name(p.file_name()))
            .collect();
        files.sort();
        for f in files {
            match load_one(&f) {
                Ok(p) => {
                    crate::fi_info!("core", FI_LOG_CORE, "loaded DL provider {} from {}", p.name, f.display());
                    out.push(p)
                }
                Err(why) => crate::fi_warn!("core", FI_LOG_CORE, "skipping DL provider {}: {}", f.display(), why),
            }
        }
    }
    out
}

fn is_dl_provider_name(name: Option<&OsStr>) -> bool {
    let Some(n) = name.and_then(OsStr::to_str) else { return false };
    n.starts_with("lib") && n.ends_with("-fi.so") && n.len() > "lib-fi.so".len()
}

type ProvIni = unsafe extern "C" fn() -> *mut fi_provider;

/// Open one DL provider and check what it returns.
pub fn load_one(path: &Path) -> Result<DlProvider, String> {
    use libloading::os::unix::{Library as ULib, RTLD_LOCAL, RTLD_NOW};
    // SAFETY: opening a shared object runs its constructors; loading provider
    // libraries from the configured path is what FI_PROVIDER_PATH asks for.
    let ulib = unsafe { ULib::open(Some(path), RTLD_NOW | RTLD_LOCAL) }.map_err(|e| format!("dlopen failed: {e}"))?;
    let raw = ulib.into_raw();
    let abi_from_elf = abi_node_of(raw);
    // SAFETY: `raw` came from into_raw just above and is handed back once.
    let lib: libloading::Library = unsafe { ULib::from_raw(raw) }.into();
    // SAFETY: the symbol's type is the upstream provider entry point,
    // `struct fi_provider *fi_prov_ini(void)`.
    let ini: libloading::Symbol<ProvIni> =
        unsafe { lib.get(b"fi_prov_ini\0") }.map_err(|_| "no fi_prov_ini symbol".to_string())?;
    // SAFETY: calling the provider's documented entry point with no arguments.
    let prov = unsafe { ini() };
    if prov.is_null() {
        return Err("fi_prov_ini returned NULL".into());
    }
    // SAFETY: non-NULL pointer returned by the provider to its static
    // struct fi_provider, which lives as long as the library stays open.
    let p = unsafe { &*prov };
    let ours = crate::abi::fi_version(FI_MAJOR_VERSION, FI_MINOR_VERSION);
    let major = p.fi_version >> 16;
    if major != FI_MAJOR_VERSION && !(major == 1 && FI_MAJOR_VERSION == 2) {
        return Err(format!("unsupported provider API version {}.{}", major, p.fi_version & 0xffff));
    }
    if p.fi_version > ours {
        return Err(format!(
            "provider API version {}.{} is newer than ours ({}.{})",
            major,
            p.fi_version & 0xffff,
            FI_MAJOR_VERSION,
            FI_MINOR_VERSION
        ));
    }
    if p.name.is_null() {
        return Err("provider has no name".into());
    }
    // SAFETY: name is a NUL-terminated string in the provider's data; we
    // copy at most 256 bytes of it.
    let name = unsafe { bounded_cstr(p.name, 256) }.ok_or("provider name is not a short string")?;
    if p.getinfo.is_none() || p.fabric.is_none() {
        return Err("provider lacks getinfo or fabric".into());
    }
    let abi = abi_from_elf.unwrap_or(if p.fi_version >= crate::abi::fi_version(2, 8) {
        AbiNode::CURRENT
    } else {
        AbiNode(9)
    });
    Ok(DlProvider {
        version: p.version,
        fi_version: p.fi_version,
        prov,
        name,
        path: path.to_path_buf(),
        abi,
        _lib: lib,
    })
}

/// Read a C string of at most `max` bytes.
///
/// # Safety
/// `p` must point to readable memory that holds a NUL within `max` bytes or
/// is at least `max` bytes long.
pub unsafe fn bounded_cstr(p: *const libc::c_char, max: usize) -> Option<String> {
    // SAFETY: caller guarantees `max` readable bytes or a NUL before them.
    let len = unsafe { libc::strnlen(p, max) };
    if len == max {
        return None;
    }
    // SAFETY: `len` bytes were just found readable and NUL-free.
    let bytes = unsafe { std::slice::from_raw_parts(p as *const u8, len) };
    String::from_utf8(bytes.to_vec()).ok()
}

/// The newest `FABRIC_1.x` version that the library needs from
/// `libfabric.so.1`, read from its dynamic section's version-needs table.
fn abi_node_of(raw: *mut libc::c_void) -> Option<AbiNode> {
    let mut map: *mut libc::c_void = std::ptr::null_mut();
    // SAFETY: RTLD_DI_LINKMAP writes a `struct link_map *` for a valid handle.
    let rc = unsafe { libc::dlinfo(raw, libc::RTLD_DI_LINKMAP, &mut map as *mut _ as *mut libc::c_void) };
    if rc != 0 || map.is_null() {
        return None;
    }
    // SAFETY: glibc's link_map starts with l_addr, l_name, l_ld.
    let (l_addr, l_ld) = unsafe {
        let m = map as *const usize;
        (*m, *(m.add(2)) as *const Elf64Dyn)
    };
    // ld.so relocates some d_ptr entries in place and not others: an address
    // below the load base is still an offset.
    let abs = |p: usize| if p < l_addr { p + l_addr } else { p };
    let mut strtab = 0usize;
    let mut verneed = 0usize;
    let mut verneednum = 0usize;
    let mut d = l_ld;
    for _ in 0..4096 {
        // SAFETY: the dynamic section is an array terminated by DT_NULL.
        let e = unsafe { &*d };
        match e.d_tag {
            DT_NULL => break,
            DT_STRTAB => strtab = e.d_un as usize,
            DT_VERNEED => verneed = e.d_un as usize,   
            DT_VERNEEDNUM => verneednum = e.d_un as usize,
            _ => {}
        }
        // SAFETY: not yet at DT_NULL, so the next entry exists.
        d = unsafe { d.add(1) };
    }
    if strtab == 0 || verneed == 0 {
        return None;
    }
    let (strtab, verneed) = (abs(strtab), abs(verneed));
    let mut best: Option<u32> = None;
    let mut vn = verneed;
    for _ in 0..verneednum.min(64) {
        // SAFETY: Elf64_Verneed records as laid out by the static linker.
        let (vn_cnt, vn_file, vn_aux, vn_next) = unsafe {
            let p = vn as *const u8;
            (
                *(p.add(2) as *const u16),
                *(p.add(4) as *const u32),
                *(p.add(8) as *const u32),
                *(p.add(12) as *const u32),
            )
        };
        // SAFETY: string table offsets from the same object.
        let file = unsafe { bounded_cstr((strtab + vn_file as usize) as *const libc::c_char, 256) };
        if file.as_deref() == Some("libfabric.so.1") {
            let mut a = vn + vn_aux as usize;
            for _ in 0..vn_cnt.min(64) {
                // SAFETY: Elf64_Vernaux: hash u32, flags u16, other u16, name u32, next u32.
                let (vna_name, vna_next) = unsafe {
                    let p = a as *const u8;
                    (*(p.add(8) as *const u32), *(p.add(12) as *const u32))
                };
                // SAFETY: as above.
                if let Some(v) = unsafe { bounded_cstr((strtab + vna_name as usize) as *const libc::c_char, 64) } {
                    if let Some(minor) = v.strip_prefix("FABRIC_1.").and_then(|m| m.parse::<u32>().ok()) {
                        best = Some(best.map_or(minor, |b| b.max(minor)));
                    }
                }
                if vna_next == 0 {
                    break;
                }
                a += vna_next as usize;
            }
        }
        if vn_next == 0 {
            break;
        }
        vn += vn_next as usize;
    }
    best.map(AbiNode)
}

/// One entry of an ELF64 dynamic section.
#[repr(C)]
struct Elf64Dyn {
    d_tag: i64,
    d_un: u64,
}
const DT_NULL: i64 = 0;
const DT_STRTAB: i64 = 5;
const DT_VERNEED: i64 = 0x6fff_fffe;
const DT_VERNEEDNUM: i64 = 0x6fff_ffff;
