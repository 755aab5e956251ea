//! (filled in by the ABI types work)
