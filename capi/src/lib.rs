//! libfabric.so.1 C entry points
