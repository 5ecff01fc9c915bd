//! DataFusion runs SQL over a Parquet file stored in blobcask.
//!
//! ```text
//! cargo run --release -p blobcask-datafusion-example -- [--store PATH] [--rows N]
//! ```
//!
//! The example builds a table of taxi trips, has DataFusion write it as
//! Parquet into a blobcask store (a multipart upload through
//! `blobcask-object-store`), then runs three SQL queries over it. For each
//! query it prints the result and what DataFusion asked the store for: how
//! many ranged reads, how many bytes of the file. Parquet's footer,
//! statistics and column chunks let DataFusion read a small part of the
//! file, and each range it asks for is one blobcask read.
//!
//! Every answer is checked against the same figures computed from the
//! generated rows in Rust; a mismatch exits non-zero (`tests/sql.rs` runs
//! this example under `cargo test`).

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use blobcask::{IndexKind, Options, Store};
use blobcask_object_store::BlobcaskObjectStore;
use bytes::Bytes;
use datafusion::arrow::array::{Array, Float64Array, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::config::TableParquetOptions;
use datafusion::dataframe::DataFrameWriteOptions;
use datafusion::prelude::{ParquetReadOptions, SessionContext};
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    ObjectStoreExt, PutMultipartOptions, PutOptions, PutPayload, PutResult,
};

/// Where DataFusion finds the store, and the table's file in it.
const STORE_URL: &str = "blobcask://demo";
const TABLE_URL: &str = "blobcask://demo/trips/trips.parquet";
const ROWS_PER_GROUP: usize = 16 * 1024;
/// Rows the example builds at most (about 40 bytes each in RAM, twice).
const MAX_ROWS: usize = 20_000_000;
const ZONES: [&str; 8] = [
    "Airport",
    "Harbour",
    "Midtown",
    "Old Town",
    "Riverside",
    "Stadium",
    "University",
    "Uptown",
];

fn main() {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("datafusion-sql: cannot start tokio: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = runtime.block_on(run()) {
        eprintln!("datafusion-sql: {e}");
        std::process::exit(1);
    }
}

type BoxError = Box<dyn std::error::Error>;

async fn run() -> Result<(), BoxError> {
    let mut store_path = None;
    let mut rows: usize = 200_000;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--store" => store_path = Some(args.next().ok_or("--store needs a path")?),
            "--rows" => {
                let n = args.next().ok_or("--rows needs a number")?;
                rows = n.parse().map_err(|e| format!("--rows {n:?}: {e}"))?;
            }
            "--help" | "-h" => {
                println!("usage: datafusion-sql [--store PATH] [--rows N (1 to {MAX_ROWS})]");
                return Ok(());
            }
            other => return Err(format!("unknown argument {other:?} (see --help)").into()),
        }
    }
    if !(1..=MAX_ROWS).contains(&rows) {
        return Err(format!("--rows must be from 1 to {MAX_ROWS}").into());
    }
    let dir = tempfile::tempdir()?;
    let path = match store_path {
        Some(p) => std::path::PathBuf::from(p),
        None => dir.path().join("trips.bcask"),
    };

    // Listing a table's directory needs an ordered index.
    let store = Store::open(&path, Options::default().index(IndexKind::BTree)).await?;
    let objects = Arc::new(Counted::new(BlobcaskObjectStore::new(store.clone())));
    let ctx = SessionContext::new();
    ctx.register_object_store(&url::Url::parse(STORE_URL)?, objects.clone());

    // Write: DataFusion encodes the rows as Parquet and uploads the file.
    let trips = Trips::generate(rows);
    let mut parquet = TableParquetOptions::default();
    parquet.global.max_row_group_size = ROWS_PER_GROUP;
    ctx.read_batch(trips.batch()?)?
        .write_parquet(
            TABLE_URL,
            DataFrameWriteOptions::new().with_single_file_output(true),
            Some(parquet),
        )
        .await?;
    let written = objects.take();
    let file_size = objects.head_size(TABLE_URL).await?;
    println!(
        "wrote {rows} trips as Parquet into {}: {} ({} row groups), {} object_store writes",
        path.display(),
        human(file_size),
        rows.div_ceil(ROWS_PER_GROUP),
        written.writes,
    );

    ctx.register_parquet("trips", TABLE_URL, ParquetReadOptions::default())
        .await?;
    objects.take();

    // 1. Every row group, two of five columns.
    let by_zone = query(
        &ctx,
        &objects,
        file_size,
        "SELECT zone, count(*) AS trips, sum(fare_cents) AS fares \
         FROM trips GROUP BY zone ORDER BY zone",
    )
    .await?;
    let zones = strings(&by_zone, 0)?;
    let counts = ints(&by_zone, 1)?;
    let fares = ints(&by_zone, 2)?;
    for (i, zone) in ZONES.iter().enumerate() {
        let want = trips.by_zone(i);
        let got = zones
            .iter()
            .position(|z| z == zone)
            .map(|j| (counts.get(j).copied(), fares.get(j).copied()));
        // A zone without trips has no group.
        let expected = (want.0 > 0).then_some((Some(want.0), Some(want.1)));
        check(&format!("zone {zone}"), got == expected)?;
    }

    // 2. A point range on the sorted key: row-group statistics leave one
    //    row group to read.
    let lo = (rows as i64) / 2;
    let hi = lo + 9;
    let range = query(
        &ctx,
        &objects,
        file_size,
        &format!(
            "SELECT trip_id, zone, distance_km, fare_cents FROM trips \
             WHERE trip_id BETWEEN {lo} AND {hi} ORDER BY trip_id"
        ),
    )
    .await?;
    let ids = ints(&range, 0)?;
    let want: Vec<i64> = (lo..=hi.min(rows as i64 - 1)).collect();
    check("trip ids of the point range", ids == want)?;
    let fares = ints(&range, 3)?;
    let want_fares: Vec<i64> = want.iter().map(|&id| trips.fare_of(id)).collect();
    check("fares of the point range", fares == want_fares)?;

    // 3. A filter on an unsorted column: every row group, three columns.
    let long = query(
        &ctx,
        &objects,
        file_size,
        "SELECT count(*) AS long_trips, max(distance_km) AS longest \
         FROM trips WHERE distance_km > 25.0 AND zone = 'Airport'",
    )
    .await?;
    let want = trips.long_airport_trips();
    check("count of long airport trips", ints(&long, 0)? == vec![want])?;

    let stats = store.stats();
    println!(
        "store: {} objects, {} of {} capacity used, I/O engine {}",
        stats.objects,
        human(stats.allocated_bytes + stats.metadata_bytes),
        human(stats.capacity),
        stats.io_engine,
    );
    println!("all answers match the rows computed in Rust");
    Ok(())
}

/// Runs `sql`, prints its result and the reads it made, and returns the
/// result's batches.
async fn query(
    ctx: &SessionContext,
    objects: &Counted,
    file_size: u64,
    sql: &str,
) -> Result<Vec<RecordBatch>, BoxError> {
    objects.take();
    let batches = ctx.sql(sql).await?.collect().await?;
    let reads = objects.take();
    println!("\n{sql}");
    println!("{}", pretty_format_batches(&batches)?);
    println!(
        "object_store: {} ranged reads ({} in get_ranges calls), {} whole-object gets, \
         {} heads; {} of the {} file read ({:.1} %)",
        reads.ranged,
        reads.in_get_ranges,
        reads.whole,
        reads.heads,
        human(reads.bytes),
        human(file_size),
        100.0 * reads.bytes as f64 / file_size.max(1) as f64,
    );
    Ok(batches)
}

fn check(what: &str, ok: bool) -> Result<(), BoxError> {
    if ok {
        Ok(())
    } else {
        Err(format!("wrong answer: {what} differs from the rows written").into())
    }
}

fn human(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}

fn column<T: 'static>(batches: &[RecordBatch], i: usize) -> Result<Vec<&T>, BoxError> {
    batches
        .iter()
        .map(|b| {
            b.columns()
                .get(i)
                .and_then(|c| c.as_any().downcast_ref::<T>())
                .ok_or_else(|| format!("result column {i} has an unexpected type").into())
        })
        .collect()
}

fn ints(batches: &[RecordBatch], i: usize) -> Result<Vec<i64>, BoxError> {
    Ok(column::<Int64Array>(batches, i)?
        .into_iter()
        .flat_map(|a| a.iter().map(|v| v.unwrap_or(i64::MIN)))
        .collect())
}

fn strings(batches: &[RecordBatch], i: usize) -> Result<Vec<String>, BoxError> {
    // DataFusion may hand the grouped strings back as Utf8 or Utf8View.
    let cast: Vec<RecordBatch> = batches
        .iter()
        .map(|b| {
            let col = b.columns().get(i).ok_or("missing result column")?;
            let utf8 = datafusion::arrow::compute::cast(col, &DataType::Utf8)?;
            Ok(RecordBatch::try_from_iter([("s", utf8)])?)
        })
        .collect::<Result<_, BoxError>>()?;
    Ok(column::<StringArray>(&cast, 0)?
        .into_iter()
        .flat_map(|a| a.iter().map(|v| v.unwrap_or_default().to_owned()))
        .collect())
}

/// The generated table: trip ids in order, the other columns from a fixed
/// pseudo-random sequence, so the answers can be computed here too.
struct Trips {
    zone: Vec<usize>,
    distance_km: Vec<f64>,
    fare_cents: Vec<i64>,
}

impl Trips {
    fn generate(rows: usize) -> Trips {
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move || {
            // xorshift64*: deterministic, no dependency needed for a demo.
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            state.wrapping_mul(0x2545_F491_4F6C_DD1D)
        };
        let mut t = Trips {
            zone: Vec::with_capacity(rows),
            distance_km: Vec::with_capacity(rows),
            fare_cents: Vec::with_capacity(rows),
        };
        for _ in 0..rows {
            let zone = (next() % ZONES.len() as u64) as usize;
            let distance = (next() % 3000) as f64 / 100.0;
            t.zone.push(zone);
            t.distance_km.push(distance);
            t.fare_cents
                .push(250 + (distance * 180.0) as i64 + (next() % 500) as i64);
        }
        t
    }

    fn batch(&self) -> Result<RecordBatch, BoxError> {
        let schema = Schema::new(vec![
            Field::new("trip_id", DataType::Int64, false),
            Field::new("zone", DataType::Utf8, false),
            Field::new("distance_km", DataType::Float64, false),
            Field::new("fare_cents", DataType::Int64, false),
            Field::new("passengers", DataType::Int64, false),
        ]);
        let n = self.zone.len() as i64;
        let zones = self.zone.iter().map(|&z| ZONES.get(z).copied());
        Ok(RecordBatch::try_new(
            Arc::new(schema),
            vec![
                Arc::new(Int64Array::from_iter_values(0..n)),
                Arc::new(StringArray::from_iter(zones)),
                Arc::new(Float64Array::from(self.distance_km.clone())),
                Arc::new(Int64Array::from(self.fare_cents.clone())),
                Arc::new(Int64Array::from_iter_values((0..n).map(|i| 1 + i % 4))),
            ],
        )?)
    }

    /// (trips, sum of fares) in zone `z`.
    fn by_zone(&self, z: usize) -> (i64, i64) {
        self.zone
            .iter()
            .zip(&self.fare_cents)
            .filter(|(&zone, _)| zone == z)
            .fold((0, 0), |(n, s), (_, &f)| (n + 1, s + f))
    }

    fn fare_of(&self, id: i64) -> i64 {
        usize::try_from(id)
            .ok()
            .and_then(|i| self.fare_cents.get(i))
            .copied()
            .unwrap_or(i64::MIN)
    }

    fn long_airport_trips(&self) -> i64 {
        self.zone
            .iter()
            .zip(&self.distance_km)
            .filter(|(&z, &d)| z == 0 && d > 25.0)
            .count() as i64
    }
}

/// What DataFusion asked the store for since the last [`Counted::take`].
#[derive(Debug, Default)]
struct Requests {
    /// Ranges read, through `get_opts` with a range or `get_ranges`.
    ranged: u64,
    /// Of those, ranges passed in `get_ranges` calls.
    in_get_ranges: u64,
    whole: u64,
    heads: u64,
    bytes: u64,
    writes: u64,
}

/// An `ObjectStore` that counts the requests passed through to blobcask.
#[derive(Debug)]
struct Counted {
    inner: BlobcaskObjectStore,
    ranged: AtomicU64,
    in_get_ranges: AtomicU64,
    whole: AtomicU64,
    heads: AtomicU64,
    bytes: AtomicU64,
    writes: AtomicU64,
}

impl Counted {
    fn new(inner: BlobcaskObjectStore) -> Counted {
        Counted {
            inner,
            ranged: AtomicU64::new(0),
            in_get_ranges: AtomicU64::new(0),
            whole: AtomicU64::new(0),
            heads: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            writes: AtomicU64::new(0),
        }
    }

    /// The counts so far, set back to zero.
    fn take(&self) -> Requests {
        let take = |c: &AtomicU64| c.swap(0, Ordering::Relaxed);
        Requests {
            ranged: take(&self.ranged),
            in_get_ranges: take(&self.in_get_ranges),
            whole: take(&self.whole),
            heads: take(&self.heads),
            bytes: take(&self.bytes),
            writes: take(&self.writes),
        }
    }

    async fn head_size(&self, url: &str) -> Result<u64, BoxError> {
        let path = Path::from_url_path(url::Url::parse(url)?.path())?;
        Ok(self.inner.head(&path).await?.size)
    }
}

impl fmt::Display for Counted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Counted({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for Counted {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let counter = match (options.head, options.range.is_some()) {
            (true, _) => &self.heads,
            (false, true) => &self.ranged,
            (false, false) => &self.whole,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let head = options.head;
        let got = self.inner.get_opts(location, options).await?;
        if !head {
            self.bytes
                .fetch_add(got.range.end - got.range.start, Ordering::Relaxed);
        }
        Ok(got)
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        let n = ranges.len() as u64;
        self.ranged.fetch_add(n, Ordering::Relaxed);
        self.in_get_ranges.fetch_add(n, Ordering::Relaxed);
        let got = self.inner.get_ranges(location, ranges).await?;
        let bytes: usize = got.iter().map(Bytes::len).sum();
        self.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        Ok(got)
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}
