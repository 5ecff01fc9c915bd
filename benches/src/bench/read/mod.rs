//! The `read` phase: random 4 KiB range reads, one in flight, through every
//! way of reading the store (async in a task and in `block_on`, blocking,
//! a current-thread runtime, tokio-uring's `LocalStore`) against `O_DIRECT`
//! pread of written blocks of the same file, the rows taking turns; the
//! readers on other runtimes are in `readers`.

mod readers;

use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use blobcask::IoEngineKind;

use blobcask_bench::figures::Figure;
use blobcask_bench::raw::{aligned, as_bytes_mut, open_direct, WrittenBlocks};
use rand::{Rng, SeedableRng};

#[cfg(target_os = "linux")]
use readers::local_reader;
use readers::{block_on_reader, current_thread_reader, random_reads, timed_reads};

use super::{engine_name, fresh, pct, process_cpu, us, Config};

pub(crate) async fn read_phase(cfg: &Config, engine: IoEngineKind) {
    let objects = if cfg.quick { 64 } else { 512 };
    let obj = 1usize << 20;
    let (store, path) = fresh(cfg, engine, (objects as u64 * obj as u64) * 2).await;
    let value = blobcask::Bytes::from(vec![7u8; obj]);
    for i in 0..objects {
        store.put(format!("obj/{i}"), value.clone()).await.unwrap();
    }
    let raw = open_direct(&path);
    // Only written blocks: a read of a fallocated-but-unwritten extent
    // returns zeros without touching the device and would flatter raw.
    // (Until 2026-11-25 raw read the file's first 64 MiB, of which the
    // store had written 78 %.)
    let written = WrittenBlocks::of(&raw).expect("the file's written blocks");
    println!(
        "raw reads: random blocks among the file's {} written ones (of {})",
        written.blocks(),
        raw.metadata().unwrap().len() / 4096
    );
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let mut buf = aligned(8192);
    // The rows take turns every 50 reads (a few ms), so a drift of the
    // device's latency (this machine's changes within seconds) falls on
    // every row alike instead of on whichever ran then.
    let rounds = if cfg.quick { 80 } else { 200 };
    let per = 50;
    let blocking = blobcask::blocking::Store::from(store.clone());
    #[cfg(target_os = "linux")]
    let uring = local_reader(store.clone(), &path);
    let (mut t_local, mut t_uring_raw): (Vec<Duration>, Vec<Duration>) = (vec![], vec![]);
    let (mut cpu_local, mut cpu_uring_raw) = (Duration::ZERO, Duration::ZERO);
    // The current-thread runtime reads a store of its own (the same
    // objects): a ring whose eventfd this process's multi-thread runtime
    // also watches wakes that runtime's reactor at every completion too,
    // which is a cost of sharing one store between runtimes, not of a
    // current-thread runtime.
    let current = current_thread_reader(
        cfg.dir.join("current-thread.blobcask"),
        engine,
        objects,
        obj,
    );
    // `block_on` of this phase's own multi-thread runtime, from a thread
    // that is none of its workers: how a `#[tokio::main]` program's main
    // future awaits. (This phase itself runs in a spawned task; until
    // 2026-11-29 the "block_on" rows read from here, so they measured a
    // task.)
    let block_on = block_on_reader(store.clone(), tokio::runtime::Handle::current());
    let (mut t_current, mut cpu_current) = (vec![], Duration::ZERO);
    let (mut t_task, mut t_task_unaligned, mut cpu_task) = (vec![], vec![], Duration::ZERO);
    let (mut t_raw, mut t_raw2, mut t_bc, mut t_bc_unaligned, mut t_blocking) =
        (vec![], vec![], vec![], vec![], vec![]);
    // CPU time (user + system, every thread of the process) of the rows
    // that run on this thread's runtime: raw, async, blocking.
    let (mut cpu_raw, mut cpu_bc, mut cpu_blocking) =
        (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    for _ in 0..rounds {
        let cpu = process_cpu();
        for _ in 0..per {
            let off = written.sample(&mut rng, 1);
            let b = &mut as_bytes_mut(&mut buf)[..4096];
            let t = Instant::now();
            raw.read_exact_at(b, off).unwrap();
            t_raw.push(t.elapsed());
        }
        cpu_raw += process_cpu() - cpu;
        // The device work of a 4 KiB read at an unaligned offset: the two
        // blocks it straddles, in one request.
        for _ in 0..per {
            let off = written.sample(&mut rng, 2);
            let b = &mut as_bytes_mut(&mut buf)[..8192];
            let t = Instant::now();
            raw.read_exact_at(b, off).unwrap();
            t_raw2.push(t.elapsed());
        }
        let reads = random_reads(&mut rng, per, objects, obj, true);
        let (times, cpu) = block_on.round(reads).await;
        t_bc.extend(times);
        cpu_bc += cpu;
        let cpu = process_cpu();
        for _ in 0..per {
            let key = format!("obj/{}", rng.random_range(0..objects));
            let off = rng.random_range(0..(obj as u64 / 4096)) * 4096;
            let t = Instant::now();
            let got = blocking.read(&key, off, 4096).unwrap();
            t_blocking.push(t.elapsed());
            assert_eq!(got.len(), 4096);
        }
        cpu_blocking += process_cpu() - cpu;
        let unaligned = random_reads(&mut rng, per, objects, obj, false);
        t_bc_unaligned.extend(block_on.round(unaligned).await.0);
        #[cfg(target_os = "linux")]
        {
            let reads = random_reads(&mut rng, per, objects, obj, true);
            let raw_offsets = (0..per).map(|_| written.sample(&mut rng, 1)).collect();
            let ((local, cpu_l), (raw, cpu_r)) = uring.round((reads, raw_offsets)).await;
            t_local.extend(local);
            t_uring_raw.extend(raw);
            cpu_local += cpu_l;
            cpu_uring_raw += cpu_r;
        }
        let reads = random_reads(&mut rng, per, objects, obj, true);
        let (times, cpu) = current.round(reads).await;
        t_current.extend(times);
        cpu_current += cpu;
        // The same in a task of this runtime (on a worker thread, which
        // drives the reactor itself when it has nothing else to run; the
        // rows above await in `block_on`, whose thread does not).
        let reads = random_reads(&mut rng, per, objects, obj, true);
        let unaligned = random_reads(&mut rng, per, objects, obj, false);
        let task_store = store.clone();
        let ((times, cpu), (times_u, _)) = tokio::spawn(async move {
            let s = &task_store;
            let read = |key: String, off| async move { s.read(&key, off, 4096).await };
            (
                timed_reads(reads, read).await,
                timed_reads(unaligned, read).await,
            )
        })
        .await
        .expect("reader task");
        t_task.extend(times);
        t_task_unaligned.extend(times_u);
        cpu_task += cpu;
    }
    for v in [
        &mut t_raw,
        &mut t_raw2,
        &mut t_bc,
        &mut t_bc_unaligned,
        &mut t_blocking,
        &mut t_local,
        &mut t_uring_raw,
        &mut t_current,
        &mut t_task,
        &mut t_task_unaligned,
    ] {
        v.sort();
    }
    println!(
        "read: random 4 KiB, 1 in flight, {} samples each",
        t_raw.len()
    );
    println!(
        "| path | p50 µs | p99 µs | p50 ratio to raw 4 KiB | p50 ratio to raw of the same blocks |"
    );
    println!("|---|---|---|---|---|");
    let raw50 = us(pct(&t_raw, 0.5));
    let raw2_50 = us(pct(&t_raw2, 0.5));
    // Each row: (figure id, label, samples, p50 of raw reads of the same
    // blocks, runtime flavour).
    let (task, in_block_on) = (
        Some("multi-thread, spawned task"),
        Some("multi-thread, block_on"),
    );
    let mut rows = vec![
        ("raw", "raw pread O_DIRECT, 4 KiB", &t_raw, raw50, None),
        (
            "raw_2_blocks",
            "raw pread O_DIRECT, 2 blocks (8 KiB)",
            &t_raw2,
            raw2_50,
            None,
        ),
        (
            "async.task",
            "Store::read (async) in a task, 4 KiB-aligned offset",
            &t_task,
            raw50,
            task,
        ),
        (
            "async.task.unaligned",
            "Store::read (async) in a task, any offset (2 blocks)",
            &t_task_unaligned,
            raw2_50,
            task,
        ),
        (
            "blocking",
            "blocking::Store::read, 4 KiB-aligned offset",
            &t_blocking,
            raw50,
            None,
        ),
        (
            "async.block_on",
            "Store::read (async) in block_on, 4 KiB-aligned offset",
            &t_bc,
            raw50,
            in_block_on,
        ),
        (
            "async.block_on.unaligned",
            "Store::read (async) in block_on, any offset (2 blocks)",
            &t_bc_unaligned,
            raw2_50,
            in_block_on,
        ),
        (
            "async.current_thread",
            "Store::read (async) on a tokio current-thread runtime",
            &t_current,
            raw50,
            Some("current-thread"),
        ),
    ];
    if !t_local.is_empty() {
        rows.push((
            "tokio_uring.read_at",
            "tokio-uring read_at O_DIRECT, 4 KiB",
            &t_uring_raw,
            raw50,
            Some("tokio-uring"),
        ));
        rows.push((
            "tokio_uring.local_store",
            "tokio-uring LocalStore::read, 4 KiB-aligned offset",
            &t_local,
            raw50,
            Some("tokio-uring"),
        ));
    }
    let e = engine_name(engine);
    for (id, name, v, same, runtime) in rows {
        println!(
            "| {name} | {:.1} | {:.1} | {:.2} | {:.2} |",
            us(pct(v, 0.5)),
            us(pct(v, 0.99)),
            us(pct(v, 0.5)) / raw50,
            us(pct(v, 0.5)) / same
        );
        let (p50, p99) = (us(pct(v, 0.5)), us(pct(v, 0.99)));
        cfg.figures.record(
            Figure::new("read", &format!("read.qd1.{id}"), name, p50, "µs p50")
                .baseline(same, "raw pread O_DIRECT of the same blocks, p50")
                .ratio(p50 / same)
                .engine(e)
                .runtime(runtime),
        );
        cfg.figures.record(
            Figure::new("read", &format!("read.qd1.{id}.p99"), name, p99, "µs p99")
                .engine(e)
                .runtime(runtime),
        );
    }
    let n = t_raw.len() as f64;
    let per_read = |d: Duration| us(d) / n;
    println!(
        "CPU per 4 KiB read (user + system, whole process): raw {:.1} µs; async Store::read in a task {:.1} µs ({:.2} x raw), in block_on {:.1} µs ({:.2} x raw); blocking {:.1} µs ({:.2} x raw); async on a current-thread runtime {:.1} µs ({:.2} x raw)",
        per_read(cpu_raw),
        per_read(cpu_task),
        per_read(cpu_task) / per_read(cpu_raw),
        per_read(cpu_bc),
        per_read(cpu_bc) / per_read(cpu_raw),
        per_read(cpu_blocking),
        per_read(cpu_blocking) / per_read(cpu_raw),
        per_read(cpu_current),
        per_read(cpu_current) / per_read(cpu_raw),
    );
    let mut cpu_rows = vec![
        ("raw", "raw pread O_DIRECT, 4 KiB", cpu_raw, None),
        (
            "async.task",
            "Store::read (async) in a task",
            cpu_task,
            task,
        ),
        (
            "async.block_on",
            "Store::read (async) in block_on",
            cpu_bc,
            in_block_on,
        ),
        ("blocking", "blocking::Store::read", cpu_blocking, None),
        (
            "async.current_thread",
            "Store::read (async) on a tokio current-thread runtime",
            cpu_current,
            Some("current-thread"),
        ),
    ];
    if !t_local.is_empty() {
        let uring = Some("tokio-uring");
        cpu_rows.push((
            "tokio_uring.read_at",
            "tokio-uring read_at",
            cpu_uring_raw,
            uring,
        ));
        cpu_rows.push((
            "tokio_uring.local_store",
            "tokio-uring LocalStore::read",
            cpu_local,
            uring,
        ));
    }
    for (id, name, cpu, runtime) in cpu_rows {
        let id = format!("read.qd1.cpu.{id}");
        cfg.figures.record(
            Figure::new("read", &id, name, per_read(cpu), "µs CPU per read")
                .baseline(per_read(cpu_raw), "raw pread O_DIRECT, CPU per read")
                .ratio(per_read(cpu) / per_read(cpu_raw))
                .engine(e)
                .runtime(runtime),
        );
    }
    if !t_local.is_empty() {
        println!(
            "CPU per 4 KiB read on tokio-uring's runtime: its own read_at {:.1} µs ({:.2} x raw); LocalStore::read {:.1} µs ({:.2} x raw)",
            per_read(cpu_uring_raw),
            per_read(cpu_uring_raw) / per_read(cpu_raw),
            per_read(cpu_local),
            per_read(cpu_local) / per_read(cpu_raw),
        );
    }
    store.close().await.unwrap();
}
