//! The cache tier measured with DataFusion: the same SQL over one Parquet
//! file, read (a) from an S3 endpoint directly, (b) through a
//! `CachedObjectStore` on its first run, (c) on a second run trusting the
//! cache (`MaxStale`), (d) on a second run revalidating each read, (e) on
//! a second run after the cache store was closed and opened again
//! (`MaxStale` and `Revalidate`), and (f) from a local blobcask store.
//!
//! ```text
//! BLOBCASK_TEST_PYTHON=/path/to/python-with-moto \
//!   cargo run --release -p blobcask-datafusion-example --features s3 \
//!   --bin cache-tier-bench -- [--rows N] [--rounds R]
//!
//! AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=... \
//!   cargo run --release -p blobcask-datafusion-example --features s3 \
//!   --bin cache-tier-bench -- --endpoint http://127.0.0.1:3900 \
//!   --bucket NAME [--region garage] [--rows N] [--rounds R]
//! ```
//!
//! By default the S3 endpoint is moto's server on 127.0.0.1, started here
//! (a Python with `moto[server]` and `boto3`, named by
//! `BLOBCASK_TEST_PYTHON`). With `--endpoint` it is an S3 server already
//! running (a single-node Garage, for example): the bucket must exist, the
//! key's credentials come from `AWS_ACCESS_KEY_ID` and
//! `AWS_SECRET_ACCESS_KEY`, and the region is `--region`'s (default
//! `us-east-1`; Garage's default `s3_region` is `garage`). The program
//! writes the object `trips/trips.parquet` there and deletes it at the
//! end.
//!
//! Every row runs once per round, the rows taking turns, and each run has
//! a new `SessionContext` (no metadata cached by DataFusion between runs);
//! the table prints each row's median over the rounds.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use blobcask::{IndexKind, Options, Store};
use blobcask_object_store::{BlobcaskObjectStore, CachedObjectStore, Freshness, TierStats};
use datafusion::arrow::array::{Float64Array, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::prelude::{ParquetReadOptions, SessionContext};
use object_store::aws::AmazonS3Builder;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};

type BoxError = Box<dyn std::error::Error>;

const URL: &str = "bench://data";
const TABLE: &str = "bench://data/trips/trips.parquet";
const ROWS_PER_GROUP: usize = 16 * 1024;
/// The queries of one run: every row group of two columns, then a point
/// range that row-group statistics narrow to one row group.
const QUERIES: [&str; 2] = [
    "SELECT zone, count(*), sum(fare_cents) FROM trips GROUP BY zone ORDER BY zone",
    "SELECT trip_id, fare_cents FROM trips WHERE trip_id BETWEEN 500000 AND 500009",
];

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio");
    if let Err(e) = runtime.block_on(run()) {
        eprintln!("cache-tier-bench: {e}");
        std::process::exit(1);
    }
}

async fn run() -> Result<(), BoxError> {
    let mut rows: usize = 1_000_000;
    let mut rounds: usize = 5;
    let mut endpoint: Option<String> = None;
    let mut bucket = String::from("bucket");
    let mut region = String::from("us-east-1");
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        let number = |name: &str, n: String| -> Result<usize, BoxError> {
            Ok(n.parse().map_err(|e| format!("{name} {n:?}: {e}"))?)
        };
        match a.as_str() {
            "--rows" => rows = number("--rows", value("--rows")?)?,
            "--rounds" => rounds = number("--rounds", value("--rounds")?)?,
            "--endpoint" => endpoint = Some(value("--endpoint")?),
            "--bucket" => bucket = value("--bucket")?,
            "--region" => region = value("--region")?,
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    let dir = tempfile::tempdir()?;
    let parquet = trips_parquet(rows)?;
    let path = Path::from("trips/trips.parquet");

    // moto, started here and stopped when dropped, unless an endpoint is
    // given.
    let moto;
    let (s3, remote) = match endpoint {
        None => {
            moto = Moto::start()?;
            let s3 = AmazonS3Builder::new()
                .with_endpoint(format!("http://127.0.0.1:{}", moto.1))
                .with_allow_http(true)
                .with_bucket_name("bucket")
                .with_region("us-east-1")
                .with_access_key_id("test")
                .with_secret_access_key("test")
                .build()?;
            (s3, format!("moto on 127.0.0.1:{}", moto.1))
        }
        Some(endpoint) => {
            let env = |name: &str| {
                std::env::var(name)
                    .map_err(|_| format!("--endpoint needs {name} in the environment"))
            };
            let s3 = AmazonS3Builder::new()
                .with_endpoint(&endpoint)
                .with_allow_http(true)
                .with_bucket_name(&bucket)
                .with_region(&region)
                .with_access_key_id(env("AWS_ACCESS_KEY_ID")?)
                .with_secret_access_key(env("AWS_SECRET_ACCESS_KEY")?)
                .build()?;
            (s3, format!("{endpoint}, bucket {bucket}, region {region}"))
        }
    };
    let s3: Arc<dyn ObjectStore> = Arc::new(s3);
    s3.put(&path, parquet.clone().into()).await?;
    let local_store = Store::open(
        dir.path().join("local.bcask"),
        Options::default().index(IndexKind::BTree),
    )
    .await?;
    let local: Arc<dyn ObjectStore> = Arc::new(BlobcaskObjectStore::new(local_store.clone()));
    local.put(&path, parquet.clone().into()).await?;
    println!(
        "{rows} rows, {:.1} MiB of Parquet, {} row groups; {rounds} rounds; S3: {remote}",
        parquet.len() as f64 / (1 << 20) as f64,
        rows.div_ceil(ROWS_PER_GROUP),
    );
    let expected = answers(&local).await?;

    const ROWS: [&str; 7] = [
        "(a) S3 only",
        "(b) tier, first run",
        "(c) tier, second run, MaxStale",
        "(d) tier, second run, Revalidate",
        "(e) tier after a restart, MaxStale",
        "(e') tier after a restart, Revalidate",
        "(f) local blobcask store",
    ];
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); ROWS.len()];
    let mut fetched: Vec<TierStats> = vec![TierStats::default(); ROWS.len()];
    let stale = Freshness::MaxStale(Duration::from_secs(3600));
    for round in 0..rounds {
        let cache_file = dir.path().join(format!("cache-{round}.bcask"));
        let cache = Store::open(&cache_file, Options::default()).await?;
        let tier = |cache: &Store, f: Freshness| {
            CachedObjectStore::builder(s3.clone(), cache.clone())
                .freshness(f)
                .build()
        };
        let (took, _) = timed(s3.clone(), None, &expected).await?;
        times[0].push(took);
        for (row, f) in [(1, stale), (2, stale), (3, Freshness::Revalidate)] {
            let t = tier(&cache, f)?;
            let (took, stats) = timed(Arc::new(t.clone()), Some(&t), &expected).await?;
            times[row].push(took);
            fetched[row] = stats.unwrap_or_default();
        }
        cache.close().await?;
        for (row, f) in [(4, stale), (5, Freshness::Revalidate)] {
            let cache = Store::open(&cache_file, Options::default()).await?;
            let t = tier(&cache, f)?;
            let (took, stats) = timed(Arc::new(t.clone()), Some(&t), &expected).await?;
            times[row].push(took);
            fetched[row] = stats.unwrap_or_default();
            cache.close().await?;
        }
        let (took, _) = timed(local.clone(), None, &expected).await?;
        times[6].push(took);
        std::fs::remove_file(&cache_file)?;
    }

    let medians: Vec<Duration> = times.iter_mut().map(|t| median(t)).collect();
    println!(
        "\n| row | median ms (both queries) | runs (ms) | remote gets / heads / MiB fetched (last round) |"
    );
    println!("|---|---|---|---|");
    for (i, name) in ROWS.iter().enumerate() {
        let s = &fetched[i];
        let all: Vec<String> = times[i].iter().map(|d| format!("{:.1}", ms(*d))).collect();
        let tier = if (1..=5).contains(&i) {
            format!(
                "{} / {} / {:.1}",
                s.remote_gets,
                s.remote_heads,
                s.bytes_fetched as f64 / (1 << 20) as f64
            )
        } else {
            "-".into()
        };
        println!(
            "| {name} | {:.1} | {} | {tier} |",
            ms(medians[i]),
            all.join(", ")
        );
    }
    let speed = |row: usize| ms(medians[6]) / ms(medians[row]);
    println!(
        "\n(c) runs at {:.2} x the local store's speed (target >= 0.9); (e) {:.2} x",
        speed(2),
        speed(4)
    );
    println!(
        "(d) takes {:.2} x the time of S3 alone (target < 1); (e') {:.2} x",
        ms(medians[3]) / ms(medians[0]),
        ms(medians[5]) / ms(medians[0])
    );
    local_store.close().await?;
    s3.delete(&path).await?;
    Ok(())
}

/// One run: a new context over `store`, the table registered, both
/// queries; the time, and the tier's counts if `store` is one (each
/// figure is checked against `expected`).
async fn timed(
    store: Arc<dyn ObjectStore>,
    tier: Option<&CachedObjectStore>,
    expected: &[String],
) -> Result<(Duration, Option<TierStats>), BoxError> {
    let started = Instant::now();
    let got = answers(&store).await?;
    let took = started.elapsed();
    if got != expected {
        return Err(format!("{store}: answers differ: {got:?} vs {expected:?}").into());
    }
    Ok((took, tier.map(CachedObjectStore::stats)))
}

/// The queries' results, printed as text.
async fn answers(store: &Arc<dyn ObjectStore>) -> Result<Vec<String>, BoxError> {
    let ctx = SessionContext::new();
    ctx.register_object_store(&url::Url::parse(URL)?, store.clone());
    ctx.register_parquet("trips", TABLE, ParquetReadOptions::default())
        .await?;
    let mut out = Vec::new();
    for sql in QUERIES {
        let batches = ctx.sql(sql).await?.collect().await?;
        out.push(datafusion::arrow::util::pretty::pretty_format_batches(&batches)?.to_string());
    }
    Ok(out)
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A Parquet file of `rows` trips (the example's columns).
fn trips_parquet(rows: usize) -> Result<Vec<u8>, BoxError> {
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
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    let n = rows as i64;
    let mut zone = Vec::with_capacity(rows);
    let mut distance = Vec::with_capacity(rows);
    let mut fare = Vec::with_capacity(rows);
    for _ in 0..rows {
        zone.push(ZONES[(next() % 8) as usize]);
        let d = (next() % 3000) as f64 / 100.0;
        distance.push(d);
        fare.push(250 + (d * 180.0) as i64 + (next() % 500) as i64);
    }
    let schema = Arc::new(Schema::new(vec![
        Field::new("trip_id", DataType::Int64, false),
        Field::new("zone", DataType::Utf8, false),
        Field::new("distance_km", DataType::Float64, false),
        Field::new("fare_cents", DataType::Int64, false),
        Field::new("passengers", DataType::Int64, false),
    ]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Int64Array::from_iter_values(0..n)),
            Arc::new(StringArray::from(zone)),
            Arc::new(Float64Array::from(distance)),
            Arc::new(Int64Array::from(fare)),
            Arc::new(Int64Array::from_iter_values((0..n).map(|i| 1 + i % 4))),
        ],
    )?;
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(ROWS_PER_GROUP))
        .build();
    let mut out = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut out, schema, Some(props))?;
    writer.write(&batch)?;
    writer.close()?;
    Ok(out)
}

/// moto's S3 server on a free loopback port with a bucket made; stops
/// when dropped.
struct Moto(Child, u16);

impl Moto {
    fn start() -> Result<Moto, BoxError> {
        let python = std::env::var("BLOBCASK_TEST_PYTHON")
            .map_err(|_| "BLOBCASK_TEST_PYTHON must name a Python with moto[server] and boto3")?;
        let script = r#"
import sys, boto3
from moto.server import ThreadedMotoServer
server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
server.start()
port = server._server.server_port
boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
             aws_access_key_id="test", aws_secret_access_key="test").create_bucket(Bucket="bucket")
print("PORT", port, flush=True)
sys.stdin.read()
server.stop()
"#;
        let mut child = Command::new(python)
            .args(["-c", script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            // moto logs every request there.
            .stderr(Stdio::null())
            .spawn()?;
        let mut out = BufReader::new(child.stdout.take().ok_or("moto's stdout")?);
        loop {
            let mut line = String::new();
            if out.read_line(&mut line)? == 0 {
                return Err("moto exited before it served".into());
            }
            if let Some(port) = line.strip_prefix("PORT ") {
                return Ok(Moto(child, port.trim().parse()?));
            }
        }
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        drop(self.0.stdin.take().map(|mut i| i.write_all(b"")));
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
