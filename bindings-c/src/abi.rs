// The version of the C ABI, apart from the crate's: `build.rs` includes
// this file to name the shared library (soname `libblobcask.so.MAJOR`),
// the Makefile reads the header's copy to install it, and programs see
// both numbers in `blobcask.h`. (No inner doc comment: `include!` takes
// items only.)

/// Changes only when a program built against an older header could break
/// (a removed or changed function, a struct changed other than by a field
/// added at its end): the soname is `libblobcask.so.BC_ABI_MAJOR`.
pub const BC_ABI_MAJOR: u32 = 1;

/// Grows with each addition (a function, a field at the end of a sized
/// struct); back to 0 when `BC_ABI_MAJOR` changes. The installed file is
/// `libblobcask.so.BC_ABI_MAJOR.BC_ABI_MINOR`.
pub const BC_ABI_MINOR: u32 = 0;
