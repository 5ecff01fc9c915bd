//! C API over the blocking blobcask store.
//!
//! Every exported function catches panics and reports them as
//! `BC_INTERNAL`, so nothing unwinds into C; every pointer argument is
//! checked for NULL; errors carry a `bc_code` mapped one-to-one from
//! `ErrorKind` plus a message. Ownership rules are in the generated header.
// FFI: raw pointers cross this boundary; each dereference states why it holds.
#![allow(unsafe_code)]
#![allow(non_camel_case_types)]
// These functions are C entry points: their pointer contract is the one the
// header states, and every pointer is NULL-checked before use.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

// cbindgen reads these modules in the order declared here, and that order
// is the order of the generated header: keep it (each comment holds the
// declarations apart so rustfmt does not sort them).

// BC_ABI_MAJOR (the soname's number), BC_ABI_MINOR.
mod abi;
mod batch;
// Result codes, enums, options, info and report structs, opaque handles.
mod types;
// Errors to codes, panics caught, pointer arguments borrowed.
mod boundary;
// Structs that carry their own size: checked, read and written by it.
mod sized;
// bc_options_default, bc_open.
mod open;
// bc_put*, bc_get, bc_read*, bc_stat, bc_delete, bc_contains.
mod objects;
// bc_upload_*, bc_list_uploads, bc_abort_upload.
mod upload;
// bc_list_open, bc_keys_open, bc_list_next, bc_list_free.
mod list;
// bc_bulk_load.
mod bulk;
// bc_store_stats, bc_grow, bc_compact, bc_sync, bc_backup.
mod maintenance;
// bc_close, bc_store_free, bc_buf_free.
mod close;
// bc_error_code, bc_error_message, bc_error_errno, bc_error_free,
// bc_code_name.
mod error;

pub use abi::*;
pub use batch::*;
pub use bulk::*;
pub use close::*;
pub use error::*;
pub use list::*;
pub use maintenance::*;
pub use objects::*;
pub use open::*;
pub use types::*;
pub use upload::*;

#[cfg(test)]
mod tests {
    #[test]
    fn max_ttl_is_the_engines() {
        assert_eq!(
            u128::from(super::BC_MAX_TTL_MICROS),
            engine::MAX_TTL.as_micros()
        );
    }

    #[test]
    fn checked_in_header_matches_the_generated_one() {
        let generated = include_str!(concat!(env!("OUT_DIR"), "/blobcask.h"));
        let checked_in = include_str!("../include/blobcask.h");
        assert!(
            generated == checked_in,
            "bindings-c/include/blobcask.h is stale: run BLOBCASK_UPDATE_HEADER=1 cargo build -p blobcask-c"
        );
    }
}
