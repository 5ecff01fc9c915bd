//! Direct I/O alignment on a block device with 4096-byte logical sectors.
//!
//! ext4 accepts 512-byte-aligned direct I/O and tmpfs accepts anything, so
//! plain tests cannot catch a 4 KiB alignment bug. A loop device created
//! with `--sector-size 4096 --direct-io=on` rejects misaligned I/O with
//! EINVAL. Needs root and `losetup`; skips (and says so) where either is
//! missing.

use crate::common;

use std::process::Command;

use blobcask::{IoEngineKind, Options, Store};
use common::*;

struct Loop(String);

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.0]).status();
    }
}

fn attach(image: &std::path::Path) -> Option<Loop> {
    let out = Command::new("losetup")
        .args(["-f", "--show", "--sector-size", "4096", "--direct-io=on"])
        .arg(image)
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!(
            "skipping: losetup failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        return None;
    }
    Some(Loop(
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_io_is_aligned_on_a_4k_sector_loop_device() {
    for engine in [IoEngineKind::IoUring, IoEngineKind::Portable] {
        let t = temp_path();
        let image = t.dir.path().join("loop.img");
        std::fs::write(&image, vec![0u8; 32 << 20]).unwrap();
        let Some(dev) = attach(&image) else { return };
        let opts = Options::new().io_engine(engine);
        // A blank device is not formatted by a plain open (invariant 7):
        // a new store on a device is asked for explicitly.
        let err = Store::open(&dev.0, opts.clone()).await.unwrap_err();
        assert_eq!(err.kind(), blobcask::ErrorKind::Corrupt, "{err}");
        let s = Store::open(&dev.0, opts.clone().create_new(true))
            .await
            .unwrap();
        let st = s.stats();
        assert!(st.direct_io, "a block device must take O_DIRECT");
        assert_eq!(
            st.capacity,
            32 << 20,
            "a block device's own size is the capacity"
        );
        for (i, size) in [1usize, 100, 4095, 4097, 100_000, 3 << 20]
            .into_iter()
            .enumerate()
        {
            s.put(format!("k{i}"), pattern(i as u64, size))
                .await
                .unwrap();
        }
        let up = s.begin_upload("up", 3 * 4096 + 7).await.unwrap();
        up.write_part(4096, pattern(50, 4096)[..].to_vec())
            .await
            .unwrap();
        up.write_part(0, pattern(51, 4096)[..].to_vec())
            .await
            .unwrap();
        up.write_part(8192, pattern(52, 4103)[..].to_vec())
            .await
            .unwrap();
        up.commit().await.unwrap();
        // Unaligned ranges are served from aligned device reads.
        let v = pattern(4, 100_000);
        assert_eq!(s.read("k4", 4097, 9000).await.unwrap(), v[4097..13097]);
        assert_eq!(s.read("k4", 99_999, 5).await.unwrap(), v[99_999..]);
        s.close().await.unwrap();
        let err = Store::open(&dev.0, opts.clone().create_new(true))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), blobcask::ErrorKind::InvalidArgument, "{err}");
        let s = Store::open(&dev.0, opts).await.unwrap();
        for (i, size) in [1usize, 100, 4095, 4097, 100_000, 3 << 20]
            .into_iter()
            .enumerate()
        {
            assert_eq!(
                s.get(format!("k{i}")).await.unwrap(),
                pattern(i as u64, size)
            );
        }
        assert_eq!(
            s.read("up", 8192, 10).await.unwrap(),
            pattern(52, 4103)[..10]
        );
        s.close().await.unwrap();
        eprintln!("{engine:?}: ok on {}", dev.0);
    }
}
