//! shm provider
