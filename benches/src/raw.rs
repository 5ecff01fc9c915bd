//! Raw-device baselines shared by the benchmark programs: block-aligned
//! buffers and O_DIRECT writes of the same bytes blobcask writes.

use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[repr(C, align(4096))]
pub struct Block([u8; 4096]);

pub fn aligned(len: usize) -> Vec<Block> {
    (0..len / 4096).map(|_| Block([0x5a; 4096])).collect()
}

pub fn as_bytes(v: &[Block]) -> &[u8] {
    let len = std::mem::size_of_val(v);
    // Plain reinterpretation of an array of byte arrays.
    unsafe_bytes(v.as_ptr().cast(), len)
}

#[allow(unsafe_code)]
fn unsafe_bytes<'a>(ptr: *const u8, len: usize) -> &'a [u8] {
    // SAFETY: ptr/len come from a live Vec<Block> borrowed for 'a.
    unsafe { std::slice::from_raw_parts(ptr, len) }
}

/// The blocks as one mutable byte slice (still 4096-aligned).
#[allow(unsafe_code)]
pub fn as_bytes_mut(v: &mut [Block]) -> &mut [u8] {
    let len = std::mem::size_of_val(v);
    // SAFETY: a slice of byte arrays reinterpreted as bytes, same lifetime.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast(), len) }
}

pub fn open_direct(path: &Path) -> File {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .expect("open O_DIRECT")
}

/// Writes `total` bytes sequentially from byte `base` of `path` with
/// O_DIRECT, `chunk`-sized requests from `threads` threads, then one
/// fdatasync: the device's sequential write speed on this file.
pub fn sequential_write(
    path: &Path,
    base: u64,
    total: u64,
    chunk: u64,
    threads: usize,
) -> Duration {
    let file = Arc::new(open_direct(path));
    let next = Arc::new(AtomicU64::new(0));
    let t = Instant::now();
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let (file, next) = (file.clone(), next.clone());
            std::thread::spawn(move || {
                let buf = aligned(chunk as usize);
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i * chunk >= total {
                        break;
                    }
                    file.write_all_at(as_bytes(&buf), base + i * chunk).unwrap();
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    file.sync_data().unwrap();
    t.elapsed()
}

/// Copies the first `total` bytes of `src` to a new file `dst` the way a
/// good sequential copy does: `chunk`-sized O_DIRECT reads and writes at
/// increasing offsets from `threads` threads (each reads a chunk, then
/// writes it), the destination preallocated first, one fdatasync at the
/// end. The time covers all of it.
pub fn sequential_copy(src: &Path, dst: &Path, total: u64, chunk: u64, threads: usize) -> Duration {
    let t = Instant::now();
    let out = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_DIRECT)
        .open(dst)
        .expect("create the copy");
    // SAFETY: fallocate on an open descriptor with valid arguments.
    #[allow(unsafe_code)]
    let r = unsafe { libc::fallocate(std::os::fd::AsRawFd::as_raw_fd(&out), 0, 0, total as i64) };
    assert_eq!(r, 0, "fallocate");
    let (input, out) = (Arc::new(open_direct(src)), Arc::new(out));
    let next = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let (input, out, next) = (input.clone(), out.clone(), next.clone());
            std::thread::spawn(move || {
                let mut buf = aligned(chunk as usize);
                loop {
                    let at = next.fetch_add(1, Ordering::Relaxed) * chunk;
                    if at >= total {
                        break;
                    }
                    let len = chunk.min(total - at).next_multiple_of(4096) as usize;
                    let bytes = &mut as_bytes_mut(&mut buf)[..len];
                    input.read_exact_at(bytes, at).unwrap();
                    out.write_all_at(bytes, at).unwrap();
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    out.sync_data().unwrap();
    t.elapsed()
}

/// The blocks of a file that hold written data, found with
/// `SEEK_DATA`/`SEEK_HOLE`: a baseline that reads a preallocated file must
/// read only these. ext4 and XFS report an unwritten (fallocated) extent as
/// a hole, and a read there returns zeros without touching the device,
/// which would flatter the baseline.
pub struct WrittenBlocks {
    /// Half-open block ranges, in file order.
    ranges: Vec<(u64, u64)>,
}

impl WrittenBlocks {
    pub fn of(file: &File) -> std::io::Result<WrittenBlocks> {
        use std::os::fd::AsRawFd;
        let fd = file.as_raw_fd();
        let end = file.metadata()?.len();
        let mut ranges = Vec::new();
        let mut at = 0u64;
        while at < end {
            // SAFETY: lseek on an open descriptor; no memory is passed.
            #[allow(unsafe_code)]
            let data = unsafe { libc::lseek(fd, at as libc::off_t, libc::SEEK_DATA) };
            if data < 0 {
                let e = std::io::Error::last_os_error();
                // ENXIO: no data past `at`.
                if e.raw_os_error() == Some(libc::ENXIO) {
                    break;
                }
                return Err(e);
            }
            // SAFETY: as above.
            #[allow(unsafe_code)]
            let hole = unsafe { libc::lseek(fd, data, libc::SEEK_HOLE) };
            if hole < 0 {
                return Err(std::io::Error::last_os_error());
            }
            let (first, past) = ((data as u64).div_ceil(4096), hole as u64 / 4096);
            if past > first {
                ranges.push((first, past));
            }
            at = hole as u64;
        }
        Ok(WrittenBlocks { ranges })
    }

    /// Whether every byte of `[start, start + len)` is written.
    pub fn covers(&self, start: u64, len: u64) -> bool {
        let (first, past) = (start / 4096, (start + len).div_ceil(4096));
        self.ranges.iter().any(|&(a, b)| a <= first && past <= b)
    }

    /// How many written blocks there are.
    pub fn blocks(&self) -> u64 {
        self.ranges.iter().map(|(a, b)| b - a).sum()
    }

    /// The longest run of written blocks, as a byte offset and length (for
    /// a tool such as fio that reads one range).
    pub fn longest(&self) -> (u64, u64) {
        let (a, b) = self
            .ranges
            .iter()
            .copied()
            .max_by_key(|(a, b)| b - a)
            .unwrap_or((0, 0));
        (a * 4096, (b - a) * 4096)
    }

    /// The byte offset of a run of `n` written blocks, uniform over every
    /// such run (`n` = 2 for a read straddling two blocks).
    pub fn sample(&self, rng: &mut impl rand::Rng, n: u64) -> u64 {
        let starts = |(a, b): (u64, u64)| (b - a + 1).saturating_sub(n);
        let total: u64 = self.ranges.iter().map(|r| starts(*r)).sum();
        assert!(total > 0, "no run of {n} written blocks");
        let mut pick = rng.random_range(0..total);
        for &r in &self.ranges {
            if pick < starts(r) {
                return (r.0 + pick) * 4096;
            }
            pick -= starts(r);
        }
        unreachable!("pick < total")
    }
}

/// How [`Ring::write_then_sync`] syncs.
#[cfg(target_os = "linux")]
#[derive(Debug, Clone, Copy)]
pub enum SyncBy {
    /// `fdatasync(2)` on the calling thread.
    Syscall,
    /// A datasync `IORING_OP_FSYNC` (the kernel runs it on a worker).
    Ring,
}

/// An io_uring of the bench's own, no store code: the floors of a durable
/// put, which issues its value and its tuple-block image at once and then
/// syncs.
#[cfg(target_os = "linux")]
pub struct Ring {
    ring: io_uring::IoUring,
    file: File,
}

#[cfg(target_os = "linux")]
impl Ring {
    pub fn new(file: File) -> Ring {
        Ring {
            ring: io_uring::IoUring::new(64).expect("io_uring"),
            file,
        }
    }

    /// Issues every write at once (one `io_uring_enter`), waits for all of
    /// them, then syncs.
    pub fn write_then_sync(&mut self, writes: &[(&[Block], u64)], sync: SyncBy) {
        use io_uring::{opcode, types};
        use std::os::fd::AsRawFd;
        let fd = types::Fd(self.file.as_raw_fd());
        let (entries, lens): (Vec<_>, Vec<i32>) = writes
            .iter()
            .enumerate()
            .map(|(i, (blocks, at))| {
                let bytes = as_bytes(blocks);
                let len = u32::try_from(bytes.len()).expect("a write under 2 GiB");
                let entry = opcode::Write::new(fd, bytes.as_ptr(), len)
                    .offset(*at)
                    .build()
                    .user_data(i as u64);
                (entry, i32::try_from(len).expect("a write under 2 GiB"))
            })
            .unzip();
        self.run(&entries, &lens);
        match sync {
            SyncBy::Syscall => self.file.sync_data().expect("fdatasync"),
            SyncBy::Ring => self.run(
                &[opcode::Fsync::new(fd)
                    .flags(types::FsyncFlags::DATASYNC)
                    .build()
                    .user_data(0)],
                &[0],
            ),
        }
    }

    /// Submits `entries` (user data: their index) and waits for all of
    /// them; each must return `expect[index]` (a write: all its bytes).
    #[allow(unsafe_code)]
    fn run(&mut self, entries: &[io_uring::squeue::Entry], expect: &[i32]) {
        for e in entries {
            // SAFETY: each entry's buffer is borrowed by the caller until
            // this returns, and this waits for every completion.
            unsafe { self.ring.submission().push(e) }.expect("room in the queue");
        }
        self.ring
            .submit_and_wait(entries.len())
            .expect("io_uring_enter");
        let done: Vec<(u64, i32)> = self
            .ring
            .completion()
            .map(|c| (c.user_data(), c.result()))
            .collect();
        assert_eq!(done.len(), entries.len());
        for (i, r) in done {
            assert!(
                r >= 0,
                "io_uring op failed: {}",
                std::io::Error::from_raw_os_error(-r)
            );
            let want = usize::try_from(i).ok().and_then(|i| expect.get(i));
            assert_eq!(Some(&r), want, "a short write");
        }
    }
}
