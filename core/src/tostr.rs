//! (placeholder until fi_tostr / fi_strerror land)
pub fn strerror(_code: i32) -> &'static str {
    "Unknown error"
}
