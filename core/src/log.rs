//! (placeholder until logging lands)
pub fn internal_error(msg: &str) {
    eprintln!("libfabric: {msg}");
}
pub fn warn_core(msg: &str) {
    eprintln!("libfabric: {msg}");
}
