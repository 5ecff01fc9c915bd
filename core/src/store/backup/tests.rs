//! The backup's own checks: the verification against a changed copy,
//! inline values changed after the snapshot, reads in runs.

use super::copy::runs;
use super::verify::check_copy;
use super::*;
use crate::meta::tuple;
use crate::options::Options;

/// The check a backup ends with accepts the copy's own content and
/// refuses one changed block checksum, size or object.
#[test]
fn the_verification_catches_a_changed_block_a_size_and_a_missing_object() {
    futures::executor::block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(dir.path().join("s"), Options::new().capacity(64 << 20))
            .await
            .unwrap();
        let values: Vec<(String, Vec<u8>)> = [10usize, 5000, 70_000, (2 << 20) + 3]
            .iter()
            .enumerate()
            .map(|(i, &n)| (format!("k{i}"), (0..n).map(|b| (b * 7 + i) as u8).collect()))
            .collect();
        for (k, v) in &values {
            s.put(k, v.clone()).await.unwrap();
        }
        let snapshot = s.snapshot().await.unwrap();
        let mut sums: Vec<Arc<[u32]>> = Vec::new();
        let mut recorded = 0;
        for p in &snapshot {
            let v = &values
                .iter()
                .find(|(k, _)| k.as_bytes() == p.key())
                .unwrap()
                .1;
            let computed: Arc<[u32]> = tuple::block_sums(v).into();
            // What the source records (tuple or trailer table) is
            // what the copy may take instead of computing them.
            if let Some(r) = s.recorded_sums(p).await.unwrap() {
                assert_eq!(r, computed, "{}", p.size);
                recorded += 1;
            }
            sums.push(computed);
        }
        assert_eq!(recorded, 3, "the three heap objects (one with a table)");
        check_copy(&s, &snapshot, &sums).await.unwrap();
        for i in 0..snapshot.len() {
            let mut wrong = sums.clone();
            let mut flipped = wrong[i].to_vec();
            flipped[0] ^= 1;
            wrong[i] = flipped.into();
            let e = check_copy(&s, &snapshot, &wrong).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Corrupt);
            assert!(e.to_string().contains("block checksums differ"), "{e}");
        }
        let mut short = snapshot;
        short.pop();
        let e = check_copy(&s, &short, &sums).await.unwrap_err();
        assert!(e.to_string().contains("objects"), "{e}");
        s.close().await.unwrap();
    });
}

/// An inline value removed from its tuple block between the snapshot's
/// lock and the read of its block comes from the values the commit
/// path kept aside (`Retired`); without them it could not be filled.
#[test]
fn inline_values_changed_after_the_snapshot_come_from_the_retired_values() {
    futures::executor::block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(dir.path().join("s"), Options::new().capacity(16 << 20))
            .await
            .unwrap();
        s.put("a", b"a, first".to_vec()).await.unwrap();
        s.put("b", b"b, first".to_vec()).await.unwrap();
        // Nothing kept aside: the replaced value is gone from its block.
        let pins = s.pin_live().unwrap();
        s.put("a", b"a, second".to_vec()).await.unwrap();
        let e = s.fill_inline(&pins).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
        assert!(e.to_string().contains("does not hold the value"), "{e}");

        let hold = s.shared().retired.hold();
        let pins = s.pin_live().unwrap();
        s.put("a", b"a, third".to_vec()).await.unwrap();
        s.delete("b").await.unwrap();
        s.fill_inline(&pins).await.unwrap();
        drop(hold);
        assert!(s.shared().retired.0.lock().1.is_empty(), "let go");
        let mut got: Vec<(Vec<u8>, Bytes)> = pins
            .iter()
            .map(|p| match p.data().unwrap() {
                ObjectData::Inline(b) => (p.key().to_vec(), b),
                ObjectData::Heap { .. } => panic!("inline"),
            })
            .collect();
        got.sort();
        assert_eq!(
            got,
            [
                (b"a".to_vec(), Bytes::from_static(b"a, second")),
                (b"b".to_vec(), Bytes::from_static(b"b, first"))
            ]
        );
        s.close().await.unwrap();
    });
}

/// Adjacent small objects are read in runs, and each comes out whole
/// and checked.
#[test]
fn adjacent_small_objects_are_read_in_runs() {
    futures::executor::block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(dir.path().join("s"), Options::new().capacity(64 << 20))
            .await
            .unwrap();
        let value = |i: usize| -> Vec<u8> { (0..9000).map(|b| (b * 3 + i) as u8).collect() };
        s.bulk_load((0..40).map(|i| (format!("k{i:02}"), value(i))))
            .await
            .unwrap();
        let snapshot = s.snapshot().await.unwrap();
        let all: Vec<usize> = (0..snapshot.len()).collect();
        let runs = runs(&snapshot, all.clone());
        assert!(
            runs.len() < 10,
            "{} runs for 40 adjacent objects",
            runs.len()
        );
        let mut read = s.read_batch(&snapshot, all).await.unwrap();
        read.sort_by_key(|(i, _, _)| *i);
        assert_eq!(read.len(), 40);
        for (i, bytes, sums) in read {
            let key = std::str::from_utf8(snapshot[i].key()).unwrap();
            let n: usize = key[1..].parse().unwrap();
            assert_eq!(&bytes[..], &value(n)[..], "{key}");
            // With the sums they were checked against.
            assert_eq!(&sums.unwrap()[..], &tuple::block_sums(&bytes)[..]);
        }
        s.close().await.unwrap();
    });
}

/// A backup's progress counts every object and byte it copies, inline,
/// batched and large (chunk by chunk) alike, and ends at the report's
/// totals.
#[test]
fn backup_progress_ends_at_the_reports_totals() {
    futures::executor::block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(dir.path().join("s"), Options::new().capacity(64 << 20))
            .await
            .unwrap();
        let sizes = [10usize, 5000, 70_000, (LARGE as usize) + 4097];
        for (i, &n) in sizes.iter().enumerate() {
            s.put(format!("k{i}").as_bytes(), vec![i as u8; n])
                .await
                .unwrap();
        }
        let progress = BackupProgress::new();
        assert_eq!((progress.objects(), progress.bytes()), (0, 0));
        let report = s
            .backup_with_progress(dir.path().join("copy"), &progress)
            .await
            .unwrap();
        let total: u64 = sizes.iter().map(|&n| n as u64).sum();
        assert_eq!((report.objects, report.bytes), (sizes.len() as u64, total));
        assert_eq!((progress.objects(), progress.bytes()), (4, total));
        s.close().await.unwrap();
    });
}
