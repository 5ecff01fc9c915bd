//! `CachedObjectStore` over object_store's `InMemory`, seen through a
//! remote that counts what it is asked and can change an object between
//! two of the tier's requests: what a second read costs, freshness under
//! overwrites and deletes (through the tier and behind its back), no read
//! mixing two versions, restarts, damaged pieces, a full cache, objects
//! with no identity.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use async_trait::async_trait;
use blobcask::{Options, Store};
use bytes::Bytes;
// The object_store version under test: 0.14 when its feature is on (also
// with both features), else 0.13 (the default build); scripts/test.sh runs
// the file once per version.
#[cfg(not(feature = "object_store_014"))]
use blobcask_object_store::v013::{
    cached,
    cached::{Clock, DEFAULT_CHUNK_SIZE},
    object_store, CachedObjectStore, Freshness,
};
#[cfg(feature = "object_store_014")]
use blobcask_object_store::v014::{
    cached,
    cached::{Clock, DEFAULT_CHUNK_SIZE},
    object_store, CachedObjectStore, Freshness,
};

use futures::stream::BoxStream;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetRange, GetResult, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, ObjectStoreExt, PutMultipartOptions, PutOptions, PutPayload, PutResult,
};
use parking_lot::Mutex;

/// Pseudo-random bytes: any 64 of them are found once in a store file.
fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            (state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 56) as u8
        })
        .collect()
}

/// The remote: `InMemory`, counting requests, able to overwrite an object
/// just before one of the tier's gets, or to hide every identity.
#[derive(Debug, Default)]
struct Remote {
    store: InMemory,
    gets: AtomicU64,
    heads: AtomicU64,
    /// The range of each get (`None`: whole object), in order.
    asked: Mutex<Vec<Option<GetRange>>>,
    /// (gets to let pass first, object, new bytes).
    swap: Mutex<Option<(u64, Path, Bytes)>>,
    /// Answer with neither ETag nor version.
    hide_identity: AtomicBool,
}

impl Remote {
    fn counts(&self) -> (u64, u64) {
        (
            self.gets.load(Ordering::SeqCst),
            self.heads.load(Ordering::SeqCst),
        )
    }

    /// Overwrites `path` with `bytes` right before the get after the next
    /// `pass` gets.
    fn swap_after(&self, pass: u64, path: &Path, bytes: Vec<u8>) {
        *self.swap.lock() = Some((pass, path.clone(), bytes.into()));
    }

    /// The object as the remote has it now (behind the tier's back).
    async fn now(&self, path: &Path) -> object_store::Result<Bytes> {
        self.store.get(path).await?.bytes().await
    }
}

impl std::fmt::Display for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CountingRemote")
    }
}

#[async_trait]
impl ObjectStore for Remote {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.store.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.store.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        if options.head {
            self.heads.fetch_add(1, Ordering::SeqCst);
        } else {
            self.gets.fetch_add(1, Ordering::SeqCst);
            self.asked.lock().push(options.range.clone());
            let due = {
                let mut swap = self.swap.lock();
                match swap.as_mut() {
                    Some((0, ..)) => swap.take(),
                    Some((pass, ..)) => {
                        *pass -= 1;
                        None
                    }
                    None => None,
                }
            };
            if let Some((_, path, bytes)) = due {
                self.store.put(&path, bytes.into()).await?;
            }
        }
        let mut got = self.store.get_opts(location, options).await?;
        if self.hide_identity.load(Ordering::SeqCst) {
            got.meta.e_tag = None;
            got.meta.version = None;
        }
        Ok(got)
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.store.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.store.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.store.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.store.copy_opts(from, to, options).await
    }
}

/// Small pieces keep the tests fast: objects up to 64 KiB whole, 64 KiB
/// chunks beyond.
const C: u64 = 64 << 10;

async fn open_cache(path: &std::path::Path) -> Store {
    Store::open(path, Options::default().capacity(64 << 20))
        .await
        .expect("open the cache store")
}

fn tier(remote: &Arc<Remote>, cache: Store, freshness: Freshness) -> CachedObjectStore {
    CachedObjectStore::builder(remote.clone(), cache)
        .freshness(freshness)
        .whole_object_limit(C)
        .chunk_size(C)
        .build()
        .expect("valid options")
}

/// A clock the test moves by hand.
fn manual_clock() -> (Clock, Arc<AtomicU64>) {
    let ms = Arc::new(AtomicU64::new(1_000_000));
    let read = ms.clone();
    let clock: Clock =
        Arc::new(move || UNIX_EPOCH + Duration::from_millis(read.load(Ordering::SeqCst)));
    (clock, ms)
}

fn slice(v: &[u8], r: Range<u64>) -> &[u8] {
    &v[r.start as usize..r.end as usize]
}

const BOTH: [Freshness; 2] = [
    Freshness::Revalidate,
    Freshness::MaxStale(Duration::from_secs(3600)),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_read_of_a_range_fetches_nothing_with_max_stale_and_only_a_head_with_revalidate() {
    for freshness in BOTH {
        let dir = tempfile::tempdir().unwrap();
        let remote = Arc::new(Remote::default());
        // Default options: a 10 MiB file is cached by 1 MiB chunks.
        let t = CachedObjectStore::builder(remote.clone(), open_cache(&dir.path().join("c")).await)
            .freshness(freshness)
            .build()
            .unwrap();
        let path = Path::from("t/part-0.parquet");
        let v = pattern(1, 10 << 20);
        remote.store.put(&path, v.clone().into()).await.unwrap();
        let footer = 10_485_000..10_485_760;

        let got = t.get_range(&path, footer.clone()).await.unwrap();
        assert_eq!(got, slice(&v, footer.clone()));
        assert_eq!(remote.counts(), (1, 1), "{freshness:?}: one head, one get");
        let s = t.stats();
        assert_eq!(
            s.bytes_fetched, DEFAULT_CHUNK_SIZE,
            "only the footer's chunk, not the file"
        );
        assert_eq!((s.hits, s.misses), (0, 1));

        let got = t.get_range(&path, footer.clone()).await.unwrap();
        assert_eq!(got, slice(&v, footer.clone()));
        let heads = match freshness {
            Freshness::Revalidate => 2,
            Freshness::MaxStale(_) => 1,
        };
        assert_eq!(remote.counts(), (1, heads), "{freshness:?}: second read");
        assert_eq!(t.stats().bytes_fetched, DEFAULT_CHUNK_SIZE);
        assert_eq!((t.stats().hits, t.stats().misses), (1, 1));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_missing_chunks_are_fetched_adjacent_ones_in_one_request() {
    let dir = tempfile::tempdir().unwrap();
    let remote = Arc::new(Remote::default());
    let t = tier(&remote, open_cache(&dir.path().join("c")).await, BOTH[1]);
    let path = Path::from("big");
    let v = pattern(2, 10 * C as usize);
    remote.store.put(&path, v.clone().into()).await.unwrap();

    t.get_range(&path, 2 * C + 5..2 * C + 9).await.unwrap();
    remote.asked.lock().clear();
    let ranges = [0..5 * C, 8 * C + 5..8 * C + 10, 2 * C + 1..2 * C + 3];
    let got = t.get_ranges(&path, &ranges).await.unwrap();
    for (r, b) in ranges.iter().zip(&got) {
        assert_eq!(b, slice(&v, r.clone()), "{r:?}");
    }
    let asked = remote.asked.lock().clone();
    let mut asked: Vec<_> = asked
        .into_iter()
        .map(|r| match r {
            Some(GetRange::Bounded(r)) => r,
            other => panic!("asked {other:?}"),
        })
        .collect();
    asked.sort_by_key(|r| r.start);
    assert_eq!(asked, vec![0..2 * C, 3 * C..5 * C, 8 * C..9 * C]);
    assert_eq!(t.stats().bytes_fetched, 6 * C);

    // Spans far apart in one cached chunk, and across two: from the cache.
    let gets = remote.counts().0;
    let ranges = [C + 40_000..C + 40_010, C..C + 10, 4 * C - 3..4 * C + 3];
    let got = t.get_ranges(&path, &ranges).await.unwrap();
    for (r, b) in ranges.iter().zip(&got) {
        assert_eq!(b, slice(&v, r.clone()), "{r:?}");
    }
    assert_eq!(remote.counts().0, gets);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_object_is_fetched_and_cached_whole() {
    let dir = tempfile::tempdir().unwrap();
    let remote = Arc::new(Remote::default());
    let t = tier(&remote, open_cache(&dir.path().join("c")).await, BOTH[1]);
    let path = Path::from("small");
    let v = pattern(3, 10_000);
    remote.store.put(&path, v.clone().into()).await.unwrap();
    assert_eq!(t.get_range(&path, 5..10).await.unwrap(), slice(&v, 5..10));
    assert_eq!(remote.asked.lock().clone(), vec![None], "the whole object");
    assert_eq!(
        t.get_ranges(&path, &[9_000..10_000, 0..1]).await.unwrap(),
        vec![slice(&v, 9_000..10_000), slice(&v, 0..1)]
    );
    assert_eq!(t.get(&path).await.unwrap().bytes().await.unwrap(), v);
    assert_eq!(remote.counts().0, 1, "later reads from the cache");
}

/// What a read through the tier gives: the bytes, or the error's name.
async fn read(
    t: &CachedObjectStore,
    path: &Path,
    range: Option<Range<u64>>,
) -> Result<Bytes, String> {
    let got = match range {
        Some(r) => t.get_range(path, r).await,
        None => match t.get(path).await {
            Ok(g) => g.bytes().await,
            Err(e) => Err(e),
        },
    };
    got.map_err(|e| match e {
        object_store::Error::NotFound { .. } => "NotFound".to_string(),
        other => format!("{other}"),
    })
}

async fn remote_now(
    remote: &Remote,
    path: &Path,
    range: Option<Range<u64>>,
) -> Result<Bytes, String> {
    match remote.now(path).await {
        Ok(b) => Ok(match range {
            Some(r) => b.slice(r.start as usize..r.end as usize),
            None => b,
        }),
        Err(object_store::Error::NotFound { .. }) => Err("NotFound".into()),
        Err(e) => Err(format!("{e}")),
    }
}

/// A whole read and two ranged reads through the tier give what the
/// remote has now.
async fn agrees(t: &CachedObjectStore, remote: &Remote, path: &Path, size: usize, step: &str) {
    for r in [None, Some(100..200), Some(C - 10..C + 10)] {
        let r = r.filter(|r| r.end as usize <= size);
        assert_eq!(
            read(t, path, r.clone()).await,
            remote_now(remote, path, r.clone()).await,
            "size {size}, {step}, range {r:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_revalidate_every_read_returns_the_remotes_current_bytes_or_its_error() {
    // Whole objects and chunked ones; whole reads and ranges.
    for size in [10_000usize, 5 * C as usize + 123] {
        let dir = tempfile::tempdir().unwrap();
        let remote = Arc::new(Remote::default());
        let t = tier(
            &remote,
            open_cache(&dir.path().join("c")).await,
            Freshness::Revalidate,
        );
        let path = Path::from(format!("obj-{size}"));
        let check = |step: &'static str| agrees(&t, &remote, &path, size, step);
        check("absent").await;
        remote
            .store
            .put(&path, pattern(10, size).into())
            .await
            .unwrap();
        check("written behind its back").await;
        check("read again").await;
        remote
            .store
            .put(&path, pattern(11, size).into())
            .await
            .unwrap();
        check("overwritten behind its back").await;
        t.put(&path, pattern(12, size).into()).await.unwrap();
        check("overwritten through it").await;
        remote.store.delete(&path).await.unwrap();
        check("deleted behind its back").await;
        assert_eq!(read(&t, &path, None).await, Err("NotFound".into()));
        remote
            .store
            .put(&path, pattern(13, size + 1).into())
            .await
            .unwrap();
        check("written again, one byte longer").await;
        t.delete(&path).await.unwrap();
        check("deleted through it").await;
        assert_eq!(read(&t, &path, None).await, Err("NotFound".into()));
        t.put(&path, pattern(14, size).into()).await.unwrap();
        check("written through it").await;
        remote
            .store
            .put(&path, pattern(15, size).into())
            .await
            .unwrap();
        check("overwritten behind its back again").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_max_stale_nothing_older_than_the_bound_is_served() {
    let bound = Duration::from_secs(10);
    for size in [10_000usize, 5 * C as usize + 123] {
        let dir = tempfile::tempdir().unwrap();
        let remote = Arc::new(Remote::default());
        let (clock, ms) = manual_clock();
        let t = CachedObjectStore::builder(remote.clone(), open_cache(&dir.path().join("c")).await)
            .freshness(Freshness::MaxStale(bound))
            .whole_object_limit(C)
            .chunk_size(C)
            .clock(clock)
            .build()
            .unwrap();
        let advance = |by: u64| ms.fetch_add(by, Ordering::SeqCst);
        let path = Path::from("immutable-mostly");
        let (v1, v2, v3) = (pattern(21, size), pattern(22, size), pattern(23, size));
        let r = Some(5_000..5_100);

        remote.store.put(&path, v1.clone().into()).await.unwrap();
        assert_eq!(read(&t, &path, None).await.unwrap(), v1);
        // Replaced behind its back at t = 0: within the bound the tier may
        // serve v1 (it does, asking nothing), past it never.
        remote.store.put(&path, v2.clone().into()).await.unwrap();
        advance(5_000);
        let before = remote.counts();
        assert_eq!(read(&t, &path, None).await.unwrap(), v1);
        assert_eq!(
            read(&t, &path, r.clone()).await.unwrap(),
            slice(&v1, r.clone().unwrap())
        );
        assert_eq!(remote.counts(), before, "within the bound: no request");
        advance(5_001);
        assert_eq!(
            read(&t, &path, r.clone()).await.unwrap(),
            slice(&v2, r.clone().unwrap())
        );
        assert_eq!(read(&t, &path, None).await.unwrap(), v2);

        // Deleted behind its back: NotFound once the confirmation of v2
        // (just now) is older than the bound.
        remote.store.delete(&path).await.unwrap();
        advance(9_000);
        assert_eq!(read(&t, &path, None).await.unwrap(), v2);
        advance(1_001);
        assert_eq!(read(&t, &path, None).await, Err("NotFound".into()));

        // Through the tier, a write is seen at once, and a delete.
        t.put(&path, v3.clone().into()).await.unwrap();
        assert_eq!(read(&t, &path, None).await.unwrap(), v3);
        t.put(&path, v1.clone().into()).await.unwrap();
        assert_eq!(
            read(&t, &path, r.clone()).await.unwrap(),
            slice(&v1, r.clone().unwrap())
        );
        t.delete(&path).await.unwrap();
        assert_eq!(read(&t, &path, None).await, Err("NotFound".into()));
        // A clock stepped back does not stretch a confirmation.
        t.put(&path, v2.clone().into()).await.unwrap();
        assert_eq!(read(&t, &path, None).await.unwrap(), v2);
        remote.store.put(&path, v3.clone().into()).await.unwrap();
        ms.fetch_sub(60_000, Ordering::SeqCst);
        assert_eq!(read(&t, &path, None).await.unwrap(), v3);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_racing_an_overwrite_never_mixes_two_versions() {
    for freshness in BOTH {
        let dir = tempfile::tempdir().unwrap();
        let remote = Arc::new(Remote::default());
        let t = tier(&remote, open_cache(&dir.path().join("c")).await, freshness);
        let path = Path::from("racing");
        let (v1, v2) = (pattern(31, 4 * C as usize), pattern(32, 4 * C as usize));
        remote.store.put(&path, v1.clone().into()).await.unwrap();

        // Two separate chunk requests (chunks 0 and 3); the object is
        // replaced between them.
        remote.swap_after(1, &path, v2.clone());
        let ranges = [0..10, 3 * C..3 * C + 10];
        let got = t.get_ranges(&path, &ranges).await.unwrap();
        for (r, b) in ranges.iter().zip(&got) {
            assert_eq!(
                b,
                slice(&v2, r.clone()),
                "{freshness:?}: all of the new version"
            );
        }
        assert_eq!(t.stats().restarts, 1);

        // Another object with chunk 1 cached, then read whole in two
        // requests (chunk 0, chunks 2-3), replaced between them.
        let path = Path::from("racing-2");
        remote.store.put(&path, v1.clone().into()).await.unwrap();
        t.get_range(&path, C..C + 1).await.unwrap();
        remote.swap_after(1, &path, v2.clone());
        let whole = t.get(&path).await.unwrap().bytes().await.unwrap();
        assert!(
            whole == v2,
            "{freshness:?}: the version the read restarted on"
        );
        assert_eq!(t.stats().restarts, 2);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_pieces_survive_a_restart() {
    for freshness in BOTH {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("cache.bcask");
        let remote = Arc::new(Remote::default());
        let (big, small) = (Path::from("big"), Path::from("small"));
        let (vb, vs) = (pattern(41, 5 * C as usize), pattern(42, 20_000));
        remote.store.put(&big, vb.clone().into()).await.unwrap();
        remote.store.put(&small, vs.clone().into()).await.unwrap();
        let r = 2 * C - 50..2 * C + 50;
        {
            let t = tier(&remote, open_cache(&file).await, freshness);
            t.get_range(&big, r.clone()).await.unwrap();
            t.get(&small).await.unwrap().bytes().await.unwrap();
            t.cache().close().await.unwrap();
        }
        let (gets, heads) = remote.counts();
        let t = tier(&remote, open_cache(&file).await, freshness);
        assert_eq!(
            t.get_range(&big, r.clone()).await.unwrap(),
            slice(&vb, r.clone())
        );
        assert_eq!(t.get(&small).await.unwrap().bytes().await.unwrap(), vs);
        let more_heads = match freshness {
            Freshness::Revalidate => 2,
            Freshness::MaxStale(_) => 0,
        };
        assert_eq!(remote.counts(), (gets, heads + more_heads), "{freshness:?}");
        assert_eq!(t.stats().hits, 3, "two chunks and one whole object");
    }
}

/// Flips one byte of the cache store file where `needle` (unique in it)
/// starts plus `at`.
fn flip_in_file(file: &std::path::Path, needle: &[u8], at: usize) {
    let mut image = std::fs::read(file).unwrap();
    let found: Vec<usize> = image
        .windows(needle.len())
        .enumerate()
        .filter(|(_, w)| *w == needle)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(found.len(), 1, "the cached bytes are in the file once");
    image[found[0] + at] ^= 0x20;
    std::fs::write(file, image).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flipped_byte_in_a_cached_piece_is_fetched_again_not_served() {
    // A chunk, and a whole object (above the store's inline threshold:
    // its bytes live in the data area).
    for (size, r) in [(4 * C as usize, C + 900..C + 1200), (20_000, 900..1200)] {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("cache.bcask");
        let remote = Arc::new(Remote::default());
        let path = Path::from("flipped");
        let v = pattern(51, size);
        remote.store.put(&path, v.clone().into()).await.unwrap();
        {
            let t = tier(&remote, open_cache(&file).await, Freshness::Revalidate);
            assert_eq!(
                t.get_range(&path, r.clone()).await.unwrap(),
                slice(&v, r.clone())
            );
            t.cache().close().await.unwrap();
        }
        flip_in_file(&file, slice(&v, r.start..r.start + 64), 100);

        let t = tier(&remote, open_cache(&file).await, Freshness::Revalidate);
        let (gets, _) = remote.counts();
        assert_eq!(
            t.get_range(&path, r.clone()).await.unwrap(),
            slice(&v, r.clone())
        );
        assert_eq!(remote.counts().0, gets + 1, "fetched again");
        assert_eq!(t.stats().damaged_dropped, 1);
        // The piece fetched again is served from the cache.
        assert_eq!(
            t.get_range(&path, r.clone()).await.unwrap(),
            slice(&v, r.clone())
        );
        assert_eq!(remote.counts().0, gets + 1);
        assert_eq!(t.stats().hits, 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_cache_serves_from_the_remote() {
    let dir = tempfile::tempdir().unwrap();
    let remote = Arc::new(Remote::default());
    let cache = Store::open(
        dir.path().join("small.bcask"),
        Options::default().capacity(2 << 20).max_capacity(2 << 20),
    )
    .await
    .unwrap();
    let t = tier(&remote, cache, Freshness::Revalidate);
    let path = Path::from("larger-than-the-cache");
    let v = pattern(61, 8 << 20);
    remote.store.put(&path, v.clone().into()).await.unwrap();
    for _ in 0..2 {
        assert_eq!(t.get(&path).await.unwrap().bytes().await.unwrap(), v);
    }
    assert!(t.stats().fills_refused > 0, "{:?}", t.stats());
    assert!(t.cache().stats().capacity <= 2 << 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_the_remote_names_no_version_of_is_not_cached() {
    let dir = tempfile::tempdir().unwrap();
    let remote = Arc::new(Remote::default());
    remote.hide_identity.store(true, Ordering::SeqCst);
    let t = tier(&remote, open_cache(&dir.path().join("c")).await, BOTH[1]);
    let path = Path::from("anonymous");
    let v = pattern(71, 3 * C as usize);
    remote.store.put(&path, v.clone().into()).await.unwrap();
    let mut gets = Vec::new();
    for _ in 0..2 {
        assert_eq!(
            t.get_range(&path, 5..C + 5).await.unwrap(),
            slice(&v, 5..C + 5)
        );
        assert_eq!(
            t.get_ranges(&path, &[0..1, 2 * C..2 * C + 1])
                .await
                .unwrap(),
            vec![slice(&v, 0..1), slice(&v, 2 * C..2 * C + 1)]
        );
        gets.push(remote.counts().0);
    }
    assert!(
        gets[0] >= 2 && gets[1] == 2 * gets[0],
        "every read from the remote: {gets:?}"
    );
    assert_eq!(t.cache().stats().objects, 0);
    assert_eq!(t.stats().passed_through, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tier_built_with_new_has_the_documented_defaults() {
    use cached::*;
    assert_eq!(DEFAULT_WHOLE_OBJECT_LIMIT, 4 << 20);
    assert_eq!(DEFAULT_CHUNK_SIZE, 1 << 20);
    assert_eq!(DEFAULT_FRESHNESS, Freshness::Revalidate);
    assert_eq!(DEFAULT_CHUNK_SIZE % CHUNK_ALIGN, 0);
    let dir = tempfile::tempdir().unwrap();
    let t = CachedObjectStore::new(
        Arc::new(InMemory::new()),
        open_cache(&dir.path().join("c")).await,
    );
    let shown = format!("{t:?}");
    for part in [
        format!("freshness: {DEFAULT_FRESHNESS:?}"),
        format!("whole_object_limit: {DEFAULT_WHOLE_OBJECT_LIMIT}"),
        format!("chunk_size: {DEFAULT_CHUNK_SIZE}"),
        format!("read_attempts: {DEFAULT_READ_ATTEMPTS}"),
    ] {
        assert!(shown.contains(&part), "{part} in {shown}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunk_size_off_the_alignment_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let remote: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let cache = open_cache(&dir.path().join("c")).await;
    for bad in [0, 1000, CHUNK + 1] {
        let built = CachedObjectStore::builder(remote.clone(), cache.clone())
            .chunk_size(bad)
            .build();
        assert!(built.is_err(), "chunk size {bad}");
    }
}

const CHUNK: u64 = 1 << 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_store_that_evicts_stays_within_its_size_and_keeps_filling() {
    let dir = tempfile::tempdir().unwrap();
    let remote = Arc::new(Remote::default());
    let size = 4 << 20;
    let cache = Store::open(
        dir.path().join("evicting.bcask"),
        Options::default()
            .capacity(size)
            .max_capacity(size)
            .eviction(blobcask::Eviction::S3Fifo),
    )
    .await
    .unwrap();
    let t = tier(&remote, cache, Freshness::Revalidate);
    let path = Path::from("four-times-the-cache");
    let v = pattern(81, 16 << 20);
    remote.store.put(&path, v.clone().into()).await.unwrap();
    for _ in 0..2 {
        assert_eq!(t.get(&path).await.unwrap().bytes().await.unwrap(), v);
    }
    let s = t.cache().stats();
    assert!(s.evictions > 0, "{s:?}");
    assert!(s.capacity <= size, "{s:?}");
    assert_eq!(t.stats().fills_refused, 0, "evicted to make room");
    // The newest pieces are cached: a range of the last chunk is served
    // without a get.
    let gets = remote.counts().0;
    let end = v.len() as u64;
    assert_eq!(
        t.get_range(&path, end - 100..end).await.unwrap(),
        slice(&v, end - 100..end)
    );
    assert_eq!(remote.counts().0, gets);
}
