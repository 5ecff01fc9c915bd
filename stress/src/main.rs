//! Stochastic stresser: many concurrent tasks draw random legal operations
//! (put, overwrite, put with a time to live too long to pass during the
//! run, get, range read, multipart upload with parts in random order,
//! abort, stat, delete, reads of other tasks' keys) and check every
//! result, while one more task compacts the store over and over (every
//! read races objects being moved). Seeded and reproducible in what each
//! task does; runs N seconds.
//!
//! ```text
//! cargo run --release -p blobcask-stress -- [--seconds N] [--tasks N] [--seed S] [--engine io_uring|portable] [--index hash|btree|fst] [--dir DIR]
//! ```
//!
//! Every value is self-identifying: 16-byte units `(key hash, generation)`
//! repeated. The owner of a key knows its exact generation; any other task
//! reading it checks that every unit it got names that key and one single
//! generation, so bytes of another object, or a mix of two versions, are
//! caught even in reads racing deletes and overwrites. At the end the store
//! is reopened and every key checked against the owners' models.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use blobcask::{ErrorKind, IndexKind, IoEngineKind, Options, PutOptions, Store, PART_ALIGN};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

const KEYS_PER_TASK: u64 = 40;

fn key_hash(key: &str) -> u64 {
    key.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

fn make_value(key: &str, gen: u64, size: usize) -> Vec<u8> {
    let mut unit = [0u8; 16];
    unit[..8].copy_from_slice(&key_hash(key).to_le_bytes());
    unit[8..].copy_from_slice(&gen.to_le_bytes());
    (0..size).map(|i| unit[i % 16]).collect()
}

/// Checks a read of `key` at object offset `offset`: every byte belongs to
/// `key` and all to one generation; returns that generation (if any full
/// unit was seen).
fn check_bytes(key: &str, offset: u64, bytes: &[u8]) -> Result<Option<u64>, String> {
    let want = key_hash(key).to_le_bytes();
    let mut gen: Option<[u8; 8]> = None;
    for (i, &b) in bytes.iter().enumerate() {
        let pos = ((offset as usize) + i) % 16;
        if pos < 8 {
            if b != want[pos] {
                return Err(format!(
                    "{key}: byte {} belongs to another object",
                    offset as usize + i
                ));
            }
        } else {
            let g = gen.get_or_insert([0; 8]);
            let first_time = bytes.len() < 16 || i < 16;
            if first_time && g[pos - 8] == 0 {
                g[pos - 8] = b;
            } else if g[pos - 8] != b {
                return Err(format!(
                    "{key}: bytes of two versions mixed at {}",
                    offset as usize + i
                ));
            }
        }
    }
    Ok(if bytes.len() >= 32 {
        gen.map(u64::from_le_bytes)
    } else {
        None
    })
}

#[derive(Default)]
struct Counters {
    puts: AtomicU64,
    uploads: AtomicU64,
    aborts: AtomicU64,
    reads: AtomicU64,
    foreign_reads: AtomicU64,
    deletes: AtomicU64,
    no_space: AtomicU64,
    compactions: AtomicU64,
    moved: AtomicU64,
}

struct Config {
    seconds: u64,
    tasks: u64,
    seed: u64,
    engine: IoEngineKind,
    index: IndexKind,
    dir: PathBuf,
    /// First size of the store in MiB; it grows from there when full.
    capacity_mib: u64,
}

fn parse() -> Config {
    let mut c = Config {
        seconds: 10,
        tasks: 32,
        seed: 1,
        engine: IoEngineKind::Auto,
        index: IndexKind::Hash,
        dir: PathBuf::from("target/stress"),
        capacity_mib: 512,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().unwrap_or_else(|| panic!("{a} needs a value"));
        match a.as_str() {
            "--seconds" => c.seconds = val().parse().expect("seconds"),
            "--tasks" => c.tasks = val().parse().expect("tasks"),
            "--seed" => c.seed = val().parse().expect("seed"),
            "--engine" => {
                c.engine = match val().as_str() {
                    "io_uring" => IoEngineKind::IoUring,
                    "portable" => IoEngineKind::Portable,
                    _ => IoEngineKind::Auto,
                }
            }
            "--index" => c.index = val().parse().expect("index"),
            "--dir" => c.dir = PathBuf::from(val()),
            "--capacity-mib" => c.capacity_mib = val().parse().expect("capacity in MiB"),
            _ => {
                eprintln!("usage: blobcask-stress [--seconds N] [--tasks N] [--seed S] [--engine E] [--index I] [--dir D] [--capacity-mib N (first size; it grows)]");
                std::process::exit(2);
            }
        }
    }
    c
}

async fn worker(
    store: Store,
    task: u64,
    cfg_seed: u64,
    tasks: u64,
    until: Instant,
    c: Arc<Counters>,
) -> BTreeMap<String, (u64, usize)> {
    let mut rng = StdRng::seed_from_u64(cfg_seed.wrapping_mul(1000) + task);
    let mut model: BTreeMap<String, (u64, usize)> = BTreeMap::new();
    let mut gen = task << 40;
    let fail = |msg: String| -> ! { panic!("task {task} (seed {cfg_seed}): {msg}") };
    while Instant::now() < until {
        let key = format!("t{task}/k{}", rng.random_range(0..KEYS_PER_TASK));
        let size = match rng.random_range(0..10) {
            0..=3 => rng.random_range(0..600),
            4..=7 => rng.random_range(600..64 << 10),
            8 => rng.random_range(64 << 10..400 << 10),
            _ => rng.random_range(400 << 10..2 << 20),
        };
        match rng.random_range(0..100) {
            0..=29 => {
                gen += 1;
                // Some with an expiry (a longer tuple) that the run never
                // reaches: it must change nothing else.
                let options = if rng.random_bool(0.3) {
                    PutOptions::default().ttl(Duration::from_secs(3600))
                } else {
                    PutOptions::default()
                };
                match store
                    .put_with(&key, make_value(&key, gen, size), options)
                    .await
                {
                    Ok(info) => {
                        if info.size != size as u64 {
                            fail(format!("put {key}: size {} != {size}", info.size));
                        }
                        model.insert(key, (gen, size));
                        c.puts.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) if e.kind() == ErrorKind::NoSpace => {
                        c.no_space.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => fail(format!("put {key}: {e}")),
                }
            }
            30..=39 => {
                gen += 1;
                let value = make_value(&key, gen, size);
                let up = match store.begin_upload(&key, size as u64).await {
                    Ok(u) => u,
                    Err(e) if e.kind() == ErrorKind::NoSpace => {
                        c.no_space.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    Err(e) => fail(format!("begin_upload {key}: {e}")),
                };
                let part = PART_ALIGN as usize * rng.random_range(1..64);
                let mut starts: Vec<usize> = (0..size).step_by(part).collect();
                starts.shuffle(&mut rng);
                for s in starts {
                    let end = (s + part).min(size);
                    up.write_part(s as u64, value[s..end].to_vec())
                        .await
                        .unwrap_or_else(|e| fail(format!("write_part {key}: {e}")));
                }
                if rng.random_bool(0.15) {
                    up.abort().await.unwrap();
                    c.aborts.fetch_add(1, Ordering::Relaxed);
                } else {
                    up.commit()
                        .await
                        .unwrap_or_else(|e| fail(format!("commit {key}: {e}")));
                    model.insert(key, (gen, size));
                    c.uploads.fetch_add(1, Ordering::Relaxed);
                }
            }
            40..=64 => {
                let expect = model.get(&key).copied();
                let (off, len) = match expect {
                    Some((_, sz)) if sz > 0 => {
                        let off = rng.random_range(0..sz as u64);
                        (off, rng.random_range(1..200_000))
                    }
                    _ => (0, u64::MAX),
                };
                match (store.read(&key, off, len).await, expect) {
                    (Ok(b), Some((g, sz))) => {
                        let end = if len == u64::MAX {
                            sz as u64
                        } else {
                            (off + len).min(sz as u64)
                        };
                        if b.len() as u64 != end - off {
                            fail(format!(
                                "read {key} {off}+{len}: {} bytes, object has {sz}",
                                b.len()
                            ));
                        }
                        if b[..] != make_value(&key, g, sz)[off as usize..end as usize] {
                            fail(format!("read {key} {off}+{len}: wrong bytes"));
                        }
                    }
                    (Err(e), None) if e.kind() == ErrorKind::NotFound => {}
                    (r, e) => fail(format!(
                        "read {key}: got {:?}, model {e:?}",
                        r.map(|b| b.len())
                    )),
                }
                c.reads.fetch_add(1, Ordering::Relaxed);
            }
            65..=79 => {
                // Another task's key: it may change under us; the bytes must
                // still be one version of that key.
                let other = format!(
                    "t{}/k{}",
                    rng.random_range(0..tasks),
                    rng.random_range(0..KEYS_PER_TASK)
                );
                let off = rng.random_range(0..4096u64);
                match store.read(&other, off, rng.random_range(1..300_000)).await {
                    Ok(b) => {
                        check_bytes(&other, off, &b).unwrap_or_else(|m| fail(m));
                    }
                    Err(e)
                        if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::InvalidArgument) => {
                    }
                    Err(e) => fail(format!("foreign read {other}: {e}")),
                }
                c.foreign_reads.fetch_add(1, Ordering::Relaxed);
            }
            80..=89 => match (store.delete(&key).await, model.remove(&key)) {
                (Ok(()), Some(_)) => {
                    c.deletes.fetch_add(1, Ordering::Relaxed);
                }
                (Err(e), None) if e.kind() == ErrorKind::NotFound => {}
                (r, m) => fail(format!("delete {key}: {r:?} with model {m:?}")),
            },
            _ => match (store.stat(&key).await, model.get(&key)) {
                (Ok(i), Some((_, sz))) if i.size == *sz as u64 => {}
                (Err(e), None) if e.kind() == ErrorKind::NotFound => {}
                (r, m) => fail(format!("stat {key}: {r:?} with model {m:?}")),
            },
        }
    }
    model
}

fn main() {
    let cfg = parse();
    std::fs::create_dir_all(&cfg.dir).unwrap();
    let path = cfg.dir.join(format!("stress-{}.blobcask", cfg.seed));
    let _ = std::fs::remove_file(&path);
    let opts = Options::new()
        .capacity(cfg.capacity_mib << 20)
        .io_engine(cfg.engine)
        .index(cfg.index);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let counters = Arc::new(Counters::default());
    let started = Instant::now();
    let models = rt.block_on(async {
        let store = Store::open(&path, opts.clone()).await.unwrap();
        let until = Instant::now() + Duration::from_secs(cfg.seconds);
        let handles: Vec<_> = (0..cfg.tasks)
            .map(|t| {
                tokio::spawn(worker(
                    store.clone(),
                    t,
                    cfg.seed,
                    cfg.tasks,
                    until,
                    counters.clone(),
                ))
            })
            .collect();
        // Compactions back to back: objects move under every read.
        let compactor = {
            let (store, c) = (store.clone(), counters.clone());
            tokio::spawn(async move {
                while Instant::now() < until {
                    match store.compact().await {
                        Ok(r) => {
                            c.compactions.fetch_add(1, Ordering::Relaxed);
                            c.moved.fetch_add(r.moved, Ordering::Relaxed);
                        }
                        Err(e) => panic!("compact: {e}"),
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            })
        };
        let mut models = BTreeMap::new();
        if let Err(e) = compactor.await {
            eprintln!("stress FAILED: {e}");
            std::process::exit(1);
        }
        for h in handles {
            match h.await {
                Ok(m) => models.extend(m),
                Err(e) => {
                    eprintln!("stress FAILED: {e}");
                    std::process::exit(1);
                }
            }
        }
        store.close().await.unwrap();
        models
    });
    // Reopen: exactly the models' state.
    // Reopened at whatever size it grew to.
    let store =
        blobcask::blocking::Store::open(&path, Options::new().io_engine(cfg.engine).create(false))
            .unwrap();
    for (key, (gen, size)) in &models {
        let got = store
            .get(key)
            .unwrap_or_else(|e| panic!("after reopen, {key}: {e}"));
        assert!(
            got[..] == make_value(key, *gen, *size)[..],
            "after reopen, {key}: wrong bytes"
        );
    }
    assert_eq!(
        store.stats().objects,
        models.len() as u64,
        "after reopen: object count"
    );
    store.close().unwrap();
    let _ = std::fs::remove_file(&path);
    let c = &counters;
    let ops = [
        &c.puts,
        &c.uploads,
        &c.aborts,
        &c.reads,
        &c.foreign_reads,
        &c.deletes,
    ]
    .iter()
    .map(|a| a.load(Ordering::Relaxed))
    .sum::<u64>();
    println!(
        "stress ok: seed {}, {} tasks, {:.1}s, {ops} operations checked (puts {}, uploads {}, aborts {}, reads {}, foreign reads {}, deletes {}, no-space {}; {} compactions moved {} objects), {} keys verified after reopen",
        cfg.seed,
        cfg.tasks,
        started.elapsed().as_secs_f64(),
        c.puts.load(Ordering::Relaxed),
        c.uploads.load(Ordering::Relaxed),
        c.aborts.load(Ordering::Relaxed),
        c.reads.load(Ordering::Relaxed),
        c.foreign_reads.load(Ordering::Relaxed),
        c.deletes.load(Ordering::Relaxed),
        c.no_space.load(Ordering::Relaxed),
        c.compactions.load(Ordering::Relaxed),
        c.moved.load(Ordering::Relaxed),
        models.len()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_identify_their_key_and_generation() {
        let v = make_value("a", 7, 100);
        assert_eq!(check_bytes("a", 0, &v).unwrap(), Some(7));
        assert_eq!(check_bytes("a", 5, &v[5..60]).unwrap(), Some(7));
        assert!(check_bytes("b", 0, &v).is_err(), "another key's bytes");
        let mut mixed = v.clone();
        mixed[40..].copy_from_slice(&make_value("a", 8, 100)[40..]);
        assert!(check_bytes("a", 0, &mixed).is_err(), "two versions mixed");
    }
}
