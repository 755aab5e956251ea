//! (module stub)
