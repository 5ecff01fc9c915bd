//! Generates `blobcask.h` with cbindgen into OUT_DIR; with
//! BLOBCASK_UPDATE_HEADER=1 it also refreshes the checked-in copy in
//! `include/`. A test compares the two so a stale header cannot ship.
//! Names the shared library for the dynamic linker: soname
//! `libblobcask.so.BC_ABI_MAJOR` (src/abi.rs).

// BC_ABI_MAJOR and BC_ABI_MINOR, the library's own constants.
#[allow(dead_code)]
mod abi {
    include!("src/abi.rs");
}

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("manifest dir");
    let out = std::env::var("OUT_DIR").expect("out dir");
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    println!("cargo:rerun-if-env-changed=BLOBCASK_UPDATE_HEADER");
    // ELF targets: a program linked with -lblobcask records
    // libblobcask.so.MAJOR, and keeps running on every library of that
    // major (the install target makes the links).
    if std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os != "macos" && os != "windows") {
        println!(
            "cargo:rustc-cdylib-link-arg=-Wl,-soname,libblobcask.so.{}",
            abi::BC_ABI_MAJOR
        );
    }
    let config =
        cbindgen::Config::from_file(format!("{dir}/cbindgen.toml")).expect("cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_crate(&dir)
        .with_config(config)
        .generate()
        .expect("generate blobcask.h");
    bindings.write_to_file(format!("{out}/blobcask.h"));
    if std::env::var("BLOBCASK_UPDATE_HEADER").is_ok_and(|v| v == "1") {
        bindings.write_to_file(format!("{dir}/include/blobcask.h"));
    }
}
