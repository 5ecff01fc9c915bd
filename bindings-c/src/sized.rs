//! Structs that carry their own size, so that a field can be added without
//! breaking programs built against an older `blobcask.h`.
//!
//! The rule, as the header states it: every struct passed by pointer
//! between a program and the library (except `bc_buf`) starts with
//! `size_t struct_size`, and fields are only ever added at its end. The
//! side that allocates the struct sets `struct_size` to its own
//! `sizeof`. The library accepts exactly the sizes some release of the
//! header had, up to its own (`SizedStruct::SIZES`); it reads or writes only the
//! first `struct_size` bytes, so an options field beyond them takes its
//! default and a report field beyond them is not written. Any other size
//! (0, garbage, a newer header than this library) is refused before
//! anything is done, and nothing past the first 8 bytes is read to find
//! that out.
//!
//! Adding a field to a sized struct: append it, add the new `sizeof` to
//! the struct's `sizes` below (the old ones stay), update its `*_INIT`
//! macro in cbindgen.toml, and give it the default an older program gets
//! (in `bc_options_init` for options). A new sized struct: `struct_size`
//! first, no trailing padding (checked here), a line below, an `*_INIT`
//! macro.

use std::mem::{offset_of, size_of};

use crate::boundary::{invalid, Fail};
use crate::{
    bc_backup_report, bc_bulk_item, bc_compact_report, bc_info, bc_list_entry, bc_load_report,
    bc_options, bc_stats, bc_upload_info,
};

/// A `#[repr(C)]` struct that starts with `struct_size: usize`.
///
/// # Safety
/// Implementors are `#[repr(C)]`, their first field is `struct_size:
/// usize`, every `SIZES` entry ends on a field boundary, and any bytes a C
/// program may write into them are a valid value (integers and pointers;
/// a `bool` only in structs the library never reads from a program).
pub(crate) unsafe trait SizedStruct: Copy {
    /// The name C sees, for messages.
    const NAME: &'static str;
    /// Every `sizeof` a release of the header gave it, oldest first; the
    /// last is this build's.
    const SIZES: &'static [usize];
}

/// Implements `SizedStruct` and checks at compile time what the scheme relies
/// on: `struct_size` first, the last size this build's, and no trailing
/// padding: the last field ends where the struct does (a field added later
/// must start at or after the old size, or an old program's padding would
/// be read as the new field).
macro_rules! sized {
    ($t:ident, last = $last:ident: $last_ty:ty, sizes = [$($size:expr),+]) => {
        // SAFETY: repr(C) with `struct_size: usize` first (checked below);
        // the sizes are whole prefixes (the last is checked to be the whole
        // struct, older ones were whole structs of their release).
        unsafe impl SizedStruct for $t {
            const NAME: &'static str = stringify!($t);
            const SIZES: &'static [usize] = &[$($size),+];
        }
        const _: () = {
            assert!(offset_of!($t, struct_size) == 0);
            let sizes = <$t as SizedStruct>::SIZES;
            assert!(sizes[sizes.len() - 1] == size_of::<$t>());
            assert!(offset_of!($t, $last) + size_of::<$last_ty>() == size_of::<$t>());
        };
    };
}

sized!(bc_options, last = eviction: u64, sizes = [88, 96]);
sized!(bc_info, last = expires_unix_micros: u64, sizes = [48]);
sized!(bc_stats, last = evicted_bytes: u64, sizes = [176, 208]);
sized!(bc_backup_report, last = elapsed_nanos: u64, sizes = [32]);
sized!(bc_compact_report, last = elapsed_micros: u64, sizes = [48]);
sized!(bc_load_report, last = elapsed_nanos: u64, sizes = [40]);
sized!(bc_list_entry, last = expires_unix_micros: u64, sizes = [56]);
sized!(bc_upload_info, last = started_micros: i64, sizes = [56]);
sized!(bc_bulk_item, last = value_len: usize, sizes = [40]);

/// The `struct_size` a program put in `*ptr` (non-NULL), if it is one the
/// library knows; reads the first 8 bytes only.
fn given_size<T: SizedStruct>(ptr: *const T, what: &str) -> Result<usize, Fail> {
    // SAFETY: non-null and, per the header, points to a T whose first
    // field is `struct_size`, readable whatever the struct's version.
    let size = unsafe { ptr.cast::<usize>().read_unaligned() };
    known_size::<T>(size, what)
}

/// `size` if some release of the header gave T that size.
fn known_size<T: SizedStruct>(size: usize, what: &str) -> Result<usize, Fail> {
    if T::SIZES.contains(&size) {
        return Ok(size);
    }
    let name = T::NAME;
    let ours = size_of::<T>();
    let init = name.to_uppercase();
    Err(invalid(&if size > ours {
        format!(
            "{what}: {name}.struct_size is {size}, larger than this library's {ours}: the \
             program was built against a newer blobcask.h than this libblobcask, or never set \
             struct_size (initialise the struct with {init}_INIT)"
        )
    } else {
        format!(
            "{what}: {name}.struct_size is {size}, a size no blobcask.h gave {name} (this \
             library's is {ours}): initialise the struct with {init}_INIT"
        )
    }))
}

/// A sized struct the program passes in (options), as the library reads
/// it: the program's first `struct_size` bytes over `defaults`.
pub(crate) fn read_in<T: SizedStruct>(ptr: *const T, defaults: T, what: &str) -> Result<T, Fail> {
    if ptr.is_null() {
        return Err(invalid(&format!("{what} is NULL")));
    }
    let size = given_size(ptr, what)?;
    let mut value = defaults;
    // SAFETY: the program's struct has `size` readable bytes (a size its
    // header gave it), `value` has at least as many (size <= sizeof(T)),
    // and T is valid for any bytes a program writes (trait contract).
    unsafe {
        std::ptr::copy_nonoverlapping(ptr.cast::<u8>(), (&raw mut value).cast::<u8>(), size);
    }
    Ok(value)
}

/// Where to write a sized struct for the program (an info or a report):
/// checked when the call starts, written when it ends.
pub(crate) struct Out<T: SizedStruct> {
    ptr: *mut T,
    size: usize,
}

impl<T: SizedStruct> Out<T> {
    /// The program's `struct_size` (the bytes `write` writes).
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// Writes the first `struct_size` bytes of `value` (its `struct_size`
    /// the program's, unchanged).
    pub(crate) fn write(&self, value: T) {
        // SAFETY: `ptr` was checked non-null with `size` bytes (a size its
        // header gave T, so a whole prefix of fields) by `required`/`optional`,
        // and `value` has at least `size` bytes. Its first field is then
        // overwritten with the program's own size.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (&raw const value).cast::<u8>(),
                self.ptr.cast(),
                self.size,
            );
            self.ptr.cast::<usize>().write_unaligned(self.size);
        }
    }
}

/// A required sized out-parameter: NULL and a bad `struct_size` are
/// refused (before the call does anything).
pub(crate) fn required<T: SizedStruct>(ptr: *mut T, what: &str) -> Result<Out<T>, Fail> {
    if ptr.is_null() {
        return Err(invalid(&format!("{what} is NULL")));
    }
    let size = given_size(ptr, what)?;
    Ok(Out { ptr, size })
}

/// A sized out-parameter whose size the program passes as an argument
/// (`bc_options_init`) rather than in the struct.
pub(crate) fn out_of_size<T: SizedStruct>(
    ptr: *mut T,
    size: usize,
    what: &str,
) -> Result<Out<T>, Fail> {
    if ptr.is_null() {
        return Err(invalid(&format!("{what} is NULL")));
    }
    let size = known_size::<T>(size, what)?;
    Ok(Out { ptr, size })
}

/// An optional sized out-parameter: NULL is `None`, a bad `struct_size`
/// is refused (before the call does anything).
pub(crate) fn optional<T: SizedStruct>(ptr: *mut T, what: &str) -> Result<Option<Out<T>>, Fail> {
    if ptr.is_null() {
        return Ok(None);
    }
    required(ptr, what).map(Some)
}

/// `struct_size` for a struct the library allocates and hands to a
/// program's callback (`bc_bulk_item`, `bc_upload_info`).
pub(crate) const fn own_size<T: SizedStruct>() -> usize {
    size_of::<T>()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A struct in its second release: `added` came after the first, whose
    /// programs pass `struct_size` 16.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, PartialEq)]
    struct grown {
        struct_size: usize,
        first: u64,
        added: u64,
    }
    sized!(grown, last = added: u64, sizes = [16, 24]);

    const DEFAULTS: grown = grown {
        struct_size: 24,
        first: 1,
        added: 2,
    };

    #[test]
    fn an_older_programs_struct_takes_defaults_beyond_its_size() {
        // Only the first release's 16 bytes exist: a read past them would
        // read past the array (Miri, ASan in the C suite).
        let old: [u64; 2] = [16, 7];
        let read = read_in(old.as_ptr().cast::<grown>(), DEFAULTS, "opts").unwrap();
        assert_eq!((read.first, read.added), (7, 2));
        let new = grown {
            struct_size: 24,
            first: 7,
            added: 9,
        };
        let read = read_in(&raw const new, DEFAULTS, "opts").unwrap();
        assert_eq!((read.first, read.added), (7, 9));
    }

    #[test]
    fn a_report_is_written_only_up_to_the_programs_size() {
        let mut old: [u64; 3] = [16, 0, 0xabab];
        let slot = required(old.as_mut_ptr().cast::<grown>(), "out").unwrap();
        slot.write(grown {
            struct_size: 24,
            first: 5,
            added: 6,
        });
        assert_eq!(old, [16, 5, 0xabab]);
    }

    #[test]
    fn sizes_no_release_had_are_refused() {
        for size in [0, 8, 20, 32, usize::MAX] {
            let bytes: [u64; 3] = [size as u64, 0, 0];
            let e = read_in(bytes.as_ptr().cast::<grown>(), DEFAULTS, "opts").unwrap_err();
            assert_eq!(e.code, crate::bc_code::BC_INVALID_ARGUMENT);
            assert!(
                e.message.contains(&format!("grown.struct_size is {size}")),
                "{}",
                e.message
            );
            let mut out = bytes;
            assert!(required(out.as_mut_ptr().cast::<grown>(), "out").is_err());
            assert!(out_of_size(out.as_mut_ptr().cast::<grown>(), size, "opts").is_err());
        }
        assert!(optional::<grown>(std::ptr::null_mut(), "out")
            .unwrap()
            .is_none());
        assert!(required::<grown>(std::ptr::null_mut(), "out").is_err());
    }
}
