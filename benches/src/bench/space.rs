//! The `space` phase (only when asked for): device bytes in use per byte
//! of values, for many objects of one size.

use blobcask::IoEngineKind;
use futures::StreamExt;

use blobcask_bench::figures::Figure;

use super::{fresh, Config};

/// Space used per byte of values for many objects of one size (only with
/// `--phase space`): what the format costs on disk, data and metadata.
pub(crate) async fn space_phase(cfg: &Config) {
    println!("space: device bytes in use / value bytes, keys obj/NNNNNN");
    println!("| object size | objects | space amplification |");
    println!("|---|---|---|");
    for size in [4096usize, 16 << 10] {
        let objects = if cfg.quick { 2000 } else { 20_000 };
        let (store, _) = fresh(cfg, IoEngineKind::Portable, (objects * size * 2) as u64).await;
        let value = blobcask::Bytes::from(vec![5u8; size]);
        futures::stream::iter(0..objects)
            .map(|i| {
                let (store, value) = (store.clone(), value.clone());
                async move { store.put(format!("obj/{i:06}"), value).await.unwrap() }
            })
            .buffer_unordered(32)
            .for_each(|_| futures::future::ready(()))
            .await;
        let st = store.stats();
        println!(
            "| {size} | {objects} | {:.4} |",
            st.space_amplification().unwrap_or(0.0)
        );
        let amp = st.space_amplification().unwrap_or(f64::NAN);
        let label = format!("{size}-byte objects, {objects} of them");
        cfg.figures.record(
            Figure::new(
                "space",
                &format!("space.{size}"),
                &label,
                amp,
                "× value bytes",
            )
            .engine("portable"),
        );
        store.close().await.unwrap();
    }
}
