//! Heap space management.
//!
//! The allocator's state is never persisted: at open it starts with the whole
//! heap free and every live piece (object data, metadata extents) is marked
//! allocated again. A piece claimed twice means two tuples share bytes, which
//! is reported as corruption instead of being silently accepted.

mod buddy;

pub use buddy::BuddyAllocator;
