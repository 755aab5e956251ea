//! (placeholder until fi_tostr / fi_strerror land)
pub fn strerror(_code: i32) -> &'static str {
    "Unknown error"
}

/// `fi_tostr` of a plain value (a flag word or an enum), used in log lines.
pub fn tostr_value(data: *const libc::c_void, ty: u32) -> String {
    let _ = (data, ty);
    String::new()
}
