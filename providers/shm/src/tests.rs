//! Multi-process tests.
