/** Options for `Store.open`. */
export interface OpenOptions {
  /**
   * Size of the store file in bytes, a whole number. A new store starts
   * at it (default 16 MiB) and grows by itself as it fills, up to
   * `maxCapacity` (a block device keeps its size). At reopen a larger size
   * grows the store; a smaller one is fine when the store grew past it by
   * itself, and refused (INVALID_ARGUMENT) below a size asked for before;
   * omitted, the store keeps its size.
   */
  capacity?: number
  /**
   * Index backend: 'hash' (no keys in memory: each `list` reads them from
   * the tuple blocks), 'btree' or 'fst' (keys in memory). Stored in the
   * store: omitted, an existing store uses its stored kind ('hash' for a
   * new one); given at a read-write open, it replaces the stored kind (a
   * read-only open uses it for itself only).
   */
  index?: 'hash' | 'btree' | 'fst'
  /**
   * Values up to this many bytes are stored inline beside their key.
   * Stored in the store like `index` (default 512 for a new store).
   */
  inlineThreshold?: number
  /**
   * Largest size the store file grows to by itself; a put that needs more
   * rejects with NO_SPACE, and `grow` beyond it with INVALID_ARGUMENT.
   * Stored in the store like `index`: omitted, an existing store keeps its
   * stored limit (a new one has none but the file system). `2 ** 64` or
   * more (e.g. `Infinity`) means no limit. A non-negative integer; anything
   * else is INVALID_ARGUMENT.
   */
  maxCapacity?: number
  /** I/O engine: 'auto' (default), 'io_uring' or 'portable'. */
  ioEngine?: 'auto' | 'io_uring' | 'portable'
  /** Bypass the page cache (default true). */
  directIo?: boolean
  /**
   * Create a store where nothing is: a missing path or an empty file
   * (default true). Any other file without a blobcask superblock is refused
   * (CORRUPT) and left untouched.
   */
  create?: boolean
  /**
   * Insist on a new store: an existing non-empty file is refused
   * (INVALID_ARGUMENT) and left untouched (default false).
   */
  createNew?: boolean
  /**
   * Open an existing store read-only: shared lock (several readers may share
   * it, a writer gets LOCKED), read-only descriptor, every change rejected
   * with UNSUPPORTED, nothing ever written (default false).
   */
  readOnly?: boolean
  /**
   * With `readOnly` only: open a store that a plain open refuses for a
   * damaged tuple block, skipping the block (its objects are missing, never
   * served from an older copy; `stats().recovery.skipped` names it), to
   * copy out what reads with `backup`. Default false.
   */
  salvage?: boolean
  /**
   * Bytes of the read cache of whole small objects (default 64 MiB; 0 turns
   * it off). `stats().cache` counts its hits.
   */
  cacheBytes?: number
  /**
   * The read cache's bound as a fraction of memory instead of `cacheBytes`
   * (in (0, 1]; the system's memory, or the cgroup's limit when lower).
   * Anything else is INVALID_ARGUMENT; so is giving both.
   */
  cacheFraction?: number
  /**
   * After open, read the tuple blocks of small (inline) values into the
   * cache in the background, into free room only, so their first gets are
   * memory hits (default true). `stats().cache.warming` says whether it
   * still reads.
   */
  warmUp?: boolean
  /**
   * When an acknowledged change is durable. `'sync'` (the default): a put,
   * delete or commit resolves once it is synced to the device, and survives
   * a crash or power cut (concurrent changes share one sync).
   * `{ maxDelayMs }`: changes resolve at once and are written as one group
   * at most `maxDelayMs` milliseconds later (or at `sync()`/`close()`); a
   * crash loses the changes of up to the last `maxDelayMs`, acknowledged
   * or not, and what survives is a prefix of them in commit order, every
   * object whole. `maxDelayMs` is a finite number of milliseconds of at
   * least 0.001 (1 µs). Anything else is INVALID_ARGUMENT. Not stored in
   * the store: given at every open.
   */
  durability?: 'sync' | { maxDelayMs: number }
  /**
   * `'s3fifo'`: the store is a bounded cache. A put or an upload that finds
   * no room deletes objects the S3-FIFO policy gives up (durably, like any
   * delete; never one being read) until it fits, instead of rejecting with
   * NO_SPACE; the store never grows past `maxCapacity`, or without one past
   * its size. `'none'` (the default) does not evict; anything else is
   * INVALID_ARGUMENT. `stats()` counts `hits`, `misses`, `evictions` and
   * `evictedBytes`. Not stored in the store: given at every open.
   */
  eviction?: 'none' | 's3fifo'
}

/**
 * Conditions of a put (at most one), and its expiry. A field that is `null`
 * counts as absent; an unknown field, or conditions that are not an object,
 * are INVALID_ARGUMENT.
 */
export interface PutConditions {
  /** Create only: ALREADY_EXISTS if the key has an object. */
  ifAbsent?: boolean | null
  /**
   * Replace only this version (`ObjectInfo.version`): VERSION_MISMATCH
   * otherwise. A number (a non-negative safe integer) or a bigint (below
   * 2^64); anything else is INVALID_ARGUMENT.
   */
  ifVersion?: number | bigint | null
  /**
   * Time to live in milliseconds (fractions down to 0.001, 1 µs): the
   * object expires that long after its commit. From then on reads, `stat`,
   * `has` and listings no longer see it, and its space is freed in the
   * background. Omitted, the object never expires (replacing one that
   * would have). Zero, negative, NaN, infinite, under 1 µs or above about
   * 100 years is INVALID_ARGUMENT, and so is a value that is not a number
   * (`null` is the same as omitted: no ttl).
   */
  ttl?: number | null
}

/** What a commit produced, or what `stat` reports. */
export interface ObjectInfo {
  size: number
  /**
   * Strictly larger for every later commit in the store. A number, so that
   * `JSON.stringify(info)` works; it would be a bigint only above
   * `Number.MAX_SAFE_INTEGER` (2^53 - 1), which takes that many commits.
   */
  version: number
  /** Commit time in milliseconds since the epoch. */
  created: number
  /** Whether the value lives inline in its tuple. */
  inline: boolean
  /** When it expires (put with a `ttl`), in milliseconds since the epoch; `null`: never. */
  expires: number | null
}

/** What `backup` did. */
export interface BackupReport {
  /** Where the copy is (the destination given). */
  path: string
  /** Objects in the copy: the live objects when the backup started. */
  objects: number
  /** Their bytes (keys not counted). */
  bytes: number
  /** Milliseconds from the call to the copy being verified and published. */
  elapsedMs: number
  /** Object bytes per second over the whole backup. */
  bytesPerSec: number
}

/** What `compact` did. */
export interface CompactReport {
  /** Objects moved to lower addresses. */
  moved: number
  /** Heap bytes copied. */
  bytesMoved: number
  /** Largest free piece before, in bytes. */
  largestFreeBefore: number
  /** Largest free piece after, in bytes. */
  largestFreeAfter: number
  /** Milliseconds the compaction took. */
  elapsedMs: number
}

/** What `bulkLoad` did. */
export interface LoadReport {
  /** Objects committed. */
  objects: number
  /** Their value bytes. */
  bytes: number
  /** Commit groups they were made visible in (each all-or-nothing). */
  groups: number
  /** Milliseconds the whole load took. */
  elapsedMs: number
  /** Objects per second over the whole load. */
  objectsPerSec: number
  /** Value bytes per second over the whole load. */
  bytesPerSec: number
}

/** An upload in progress, as `listUploads` shows it. */
export interface UploadInfo {
  /** Identifies the upload in its store until it ends (`Upload.id`, `abortUpload`). */
  id: number
  /** The key it will commit. */
  key: Buffer
  /** The object size given to `beginUpload`. */
  size: number
  /** Bytes written so far (whole parts). */
  written: number
  /** When `beginUpload` was called, in milliseconds since the epoch (`new Date(started)`). */
  started: number
}

/**
 * Space and content figures. Every report is a plain object built from
 * the engine's own list of figures, the same in every binding.
 */
export interface Stats {
  /** Committed objects. */
  objects: number
  /** Sum of the sizes of committed objects. */
  logicalBytes: number
  /** Heap bytes held by committed objects' pieces. */
  allocatedBytes: number
  /** Bytes of the metadata area (tuple blocks and their journal). */
  metadataBytes: number
  /** Bytes not allocated to anything. */
  freeBytes: number
  /** The largest run a new object gets in one piece. */
  largestFreePiece: number
  /** Size of the store file or device (it grows up to `maxCapacity`). */
  capacity: number
  /** Largest size the store grows to by itself; `null`: no limit but the file system. */
  maxCapacity: number | null
  /** Bytes written to the device since open (data, metadata, superblock). */
  deviceBytesWritten: number
  /** Bytes of values committed since open. */
  userBytesWritten: number
  /** Group commits since open (each ends with one sync). */
  commitGroups: number
  /** Reads since open that found their key. */
  hits: number
  /** Reads since open of keys with no object (NOT_FOUND). */
  misses: number
  /** Objects a cache store (`eviction: 's3fifo'`) gave up to make room since open. */
  evictions: number
  /** Sum of the sizes of the objects counted in `evictions`. */
  evictedBytes: number
  /** Bytes occupied on the device per byte of committed values; `null` while empty. */
  spaceAmplification: number | null
  /** Device bytes written per value byte committed since open; `null` before the first commit. */
  writeAmplification: number | null
  /** `'io_uring'` or `'portable'`. */
  ioEngine: string
  /** Whether reads and writes bypass the page cache. */
  directIo: boolean
  /** `'hash'`, `'btree'` or `'fst'`. */
  index: string
  /** The read cache since open. */
  cache: CacheStats
  /** What recovery did when the store was opened. */
  recovery: Recovery
}

/** Reads served from the read cache and from the device, bytes held, bound. */
export interface CacheStats {
  hits: number
  misses: number
  bytes: number
  /** The cache's bound in bytes (0: no cache). */
  capacity: number
  /** Tuple blocks the warm-up after open read into the cache. */
  warmedBlocks: number
  /** Whether the warm-up still reads. */
  warming: boolean
}

/** What recovery found and did at open. */
export interface Recovery {
  /** The store had been closed cleanly: nothing could be torn. */
  clean: boolean
  /** Commit groups rolled back whole (cut by a crash before their sync). */
  rolledBackGroups: number
  /** Objects whose newest version was rolled back (or removed, when new). */
  rolledBackObjects: number
  /** Damage found that lost nothing, and what was done about it. */
  repaired: Array<string>
  /** What was rolled back and why (at most 100 object names). */
  details: Array<string>
  /** Damaged tuple blocks a `salvage` open skipped (their objects are missing); empty otherwise. */
  skipped: Array<string>
  /** The state was loaded from the index image the last clean close wrote (no tuple block was read). */
  fromImage: boolean
}

/** The `code` of every error blobcask throws or rejects with. */
export type ErrorCode =
  | 'NOT_FOUND'
  | 'INVALID_ARGUMENT'
  | 'TOO_LARGE'
  | 'NO_SPACE'
  | 'CORRUPT'
  | 'IO'
  | 'LOCKED'
  | 'UNSUPPORTED'
  | 'CLOSED'
  | 'ALREADY_EXISTS'
  | 'VERSION_MISMATCH'
  /** A bug: a panic in blobcask, or a failure of Node-API itself. */
  | 'INTERNAL'

/**
 * What blobcask throws or rejects with: an Error whose `code` names the
 * kind. Its `stack` shows the caller's frames (for a rejection, the async
 * functions awaiting it). Exceptions of the caller's own (an iterable
 * given to `bulkLoad` that throws) pass through unchanged. A call given
 * more arguments than it takes is INVALID_ARGUMENT (an argument too many
 * is a mistake, never ignored); `undefined` for an optional one is fine.
 */
export declare class BlobcaskError extends Error {
  private constructor()
  readonly name: 'BlobcaskError'
  /** The kind. */
  code: ErrorCode
  /**
   * The operating system's error, when it caused this one (code 'IO'
   * mostly): an Error with Node's `code` for it ('ENOENT', 'ENOTDIR',
   * 'EIO', ...) and its `errno` (negative, as in Node's own errors).
   */
  cause?: Error & { code: string; errno: number }
  /**
   * For an argument of the wrong JavaScript type (code INVALID_ARGUMENT)
   * or a Node-API failure (INTERNAL): Node-API's status, as napi-rs names
   * it ('StringExpected', 'NumberExpected', ...).
   */
  napiStatus?: string
  /** For an error that refused a `batch`: the index of the operation that failed. */
  batchOp?: number
}

export type Key = string | Uint8Array

/**
 * A value to store: bytes, or a string, stored as its UTF-8 bytes (as
 * classic-level and lmdb-js store one; it reads back as a Buffer, which
 * `.toString()` decodes). A string with a lone surrogate, and anything
 * else, is INVALID_ARGUMENT.
 */
export type Value = Uint8Array | string

/** Options of `bulkLoad`. */
export interface BulkLoadOptions {
  /**
   * Called as `progress(objects, bytes)` with the items taken so far at
   * most every 250 ms, and once with the totals before the promise
   * resolves. If it throws, the load stops as if the iterable had thrown.
   */
  progress?: ((objects: number, bytes: number) => void) | null
}

/** One operation of `Store.batch`. */
export type BatchOperation =
  | { type: 'put'; key: Key; value: Value; ifAbsent?: boolean | null; ifVersion?: number | bigint | null; ttl?: number | null }
  | { type: 'del'; key: Key; ifVersion?: number | bigint | null }

/** A multipart upload: parts in any order, concurrently, then one atomic commit. */
export declare class Upload {
  /** This upload's id in `listUploads` (for `abortUpload`); still readable once committed or aborted. */
  readonly id: number
  /**
   * Writes `data` at `offset` (a multiple of 4096). `data` is copied before
   * this returns. A part overlapping one still being written rejects with
   * INVALID_ARGUMENT (retry once that one settled); a part that rejects
   * leaves its range unwritten.
   */
  writePart(offset: number, data: Uint8Array, crc32c?: number): Promise<void>
  /**
   * Makes the object visible atomically. `conditions` as for `Store.put`: a
   * bad one rejects with INVALID_ARGUMENT and leaves the upload as it was. A
   * commit the store refuses ends the upload and frees its space: a
   * condition not met (ALREADY_EXISTS, VERSION_MISMATCH), or bytes never
   * written (INVALID_ARGUMENT). A commit while a `writePart` of this upload
   * is still under way rejects with INVALID_ARGUMENT and leaves the upload
   * as it was (commit once every part has resolved). Only parts that
   * resolved count as written. Once the upload ended, `writePart` and
   * `commit` reject with CLOSED, saying how it ended.
   */
  commit(conditions?: PutConditions | null): Promise<ObjectInfo>
  /** Abandons the upload and frees its space (a no-op once it ended). */
  abort(): Promise<void>
  /**
   * `await using up = await store.beginUpload(...)`: aborts the upload at
   * the end of the scope unless it was committed. Defined where the
   * runtime has `Symbol.asyncDispose`.
   */
  [Symbol.asyncDispose](): Promise<void>
}

/** An open blob store. */
export declare class Store {
  private constructor()
  /** Opens (creating when missing) the store at `path`. */
  static open(path: string, options?: OpenOptions): Promise<Store>
  /** Synchronous `open`, for scripts. */
  static openSync(path: string, options?: OpenOptions): Store
  /**
   * Stores `value` under `key`; resolves once durable. Puts issued together
   * commit together. `value` is copied before `put` returns: changing the
   * Buffer afterwards does not change what is stored. `ifAbsent` creates
   * only (rejects with ALREADY_EXISTS); `ifVersion` replaces only that
   * version (VERSION_MISMATCH otherwise), decided in commit order. `ttl`
   * (milliseconds) makes the object expire that long after its commit.
   */
  put(key: Key, value: Value, conditions?: PutConditions | null): Promise<ObjectInfo>
  /**
   * The whole object, as a Buffer that is the caller's own: writing into
   * it changes nothing else, and it stays valid after the key is
   * overwritten or deleted and the store closed. Results up to 1 MiB are
   * copies; larger ones are Buffers over the engine's read buffer (no
   * copy). Resolves to `undefined` when `key` has no object (or it has
   * expired), as classic-level 3's `get` does; a stored empty value is an
   * empty Buffer. `read`, `stat` and `delete` reject with NOT_FOUND instead.
   */
  get(key: Key): Promise<Buffer | undefined>
  /**
   * `length` bytes from `offset` (to the end when omitted), clipped at the
   * end. Rejects with NOT_FOUND when `key` has no object, INVALID_ARGUMENT
   * for an offset past the end.
   */
  read(key: Key, offset?: number, length?: number): Promise<Buffer>
  /**
   * Reads the object from `offset` (default 0) into `buffer`: as many bytes
   * as `buffer` holds, fewer at the object's end; resolves to the count.
   * Rejects with NOT_FOUND when `key` has no object, INVALID_ARGUMENT for
   * an offset past the end; nothing is written into `buffer` on an error.
   * The bytes are copied into `buffer` on the JavaScript thread, 2 MiB
   * per event-loop turn: leave `buffer` alone until the promise settles.
   */
  readInto(key: Key, buffer: ArrayBufferView, offset?: number): Promise<number>
  /** Size, version and commit time (rejects with NOT_FOUND when `key` has no object). */
  stat(key: Key): Promise<ObjectInfo>
  /** Deletes `key`; resolves once durable (rejects with NOT_FOUND when `key` has no object). */
  delete(key: Key): Promise<void>
  /**
   * Commits every operation or none (one commit, one sync), like
   * classic-level's `batch`. Resolves once durable with each operation's
   * outcome (a put's ObjectInfo, whether a del removed an object). A
   * refused batch writes nothing; its error's `batchOp` names the
   * operation that failed.
   */
  batch(operations: BatchOperation[]): Promise<Array<ObjectInfo | boolean>>
  /** Synchronous `batch`. */
  batchSync(operations: BatchOperation[]): Array<ObjectInfo | boolean>
  /** The whole object of each key, in order; `undefined` for a miss. */
  getMany(keys: Key[]): Promise<Array<Buffer | undefined>>
  /** Synchronous `getMany` (blocks the event loop; for scripts). */
  getManySync(keys: Key[]): Array<Buffer | undefined>
  /** Whether `key` has an object (no I/O). */
  has(key: Key): boolean
  /**
   * Keys starting with `prefix`, in byte order, with every index. On
   * 'hash' (the default) the first step reads the keys from the tuple
   * blocks (one pass, off the event loop); 'btree' and 'fst' page through
   * the keys they hold. Keys added or removed meanwhile may or may not
   * appear; every other key appears once.
   */
  list(prefix?: Key): AsyncIterableIterator<Buffer>
  /** Starts a multipart upload of exactly `size` bytes. */
  beginUpload(key: Key, size: number): Promise<Upload>
  /**
   * Loads every `[key, value]` pair of `items` (an array, a Map, any
   * iterable or async iterable) at sequential-write speed, replacing
   * existing keys; resolves once all are committed. Keys and values are
   * checked like `put`'s and copied as they are taken (the iterable may
   * reuse its Buffers), in batches, so memory stays bounded whatever the
   * total. Objects become visible commit group by commit group, in the
   * order given; a crash leaves a prefix of them.
   *
   * A bad item (not a two-element `[key, value]` array, a key that is not a
   * string or Uint8Array, a value that is not a Uint8Array or string) or an
   * exception of the iterable or of `options.progress` ends the load: the items before it are loaded, and the
   * promise rejects with INVALID_ARGUMENT (naming the item's index) or the
   * iterable's own exception. An error of the store (TOO_LARGE key,
   * NO_SPACE, ...) rejects with it, and takes precedence; the commit groups
   * finished before it stay (its message says how many objects).
   * INVALID_ARGUMENT when `items` is not iterable, UNSUPPORTED on a
   * read-only store, CLOSED after `close()`.
   */
  bulkLoad(
    items: Iterable<readonly [Key, Value]> | AsyncIterable<readonly [Key, Value]>,
    options?: BulkLoadOptions | null,
  ): Promise<LoadReport>
  /**
   * The uploads in progress on this store (begun through this process's
   * open store and neither committed, aborted nor dropped), oldest first.
   * Memory only, no I/O. Uploads are not persisted: one not committed when
   * the process ends is gone at the next open, its space free. Throws
   * CLOSED after `close()`.
   */
  listUploads(): UploadInfo[]
  /**
   * Aborts upload `id` wherever its handle is (synchronous: memory only,
   * no I/O): its space is freed once parts being written finish, and the
   * handle's later `writePart` and `commit` reject with CLOSED. Throws
   * NOT_FOUND when no such upload is in progress (committed, aborted or
   * dropped), CLOSED after `close()`, INVALID_ARGUMENT for an `id` that is
   * not a non-negative integer. A commit already under way is not stopped.
   */
  abortUpload(id: number): void
  /** Space and content figures. */
  stats(): Stats
  /**
   * Grows the store file to `capacity` bytes (rounded down to 4096) now,
   * with the space reserved on the file system; resolves once the new size
   * is durable (`stats().capacity`). The current size is a no-op. Rejects
   * with INVALID_ARGUMENT for a smaller size (a store never shrinks) or one
   * above `maxCapacity`, UNSUPPORTED on a block device or a read-only
   * store, NO_SPACE when the file system is full (the store keeps its
   * size), CLOSED after `close()`.
   */
  grow(capacity: number): Promise<void>
  /** Barrier: resolves once everything acknowledged before is durable. */
  sync(): Promise<void>
  /**
   * Writes a consistent copy of the store to `dest`, a path that must not
   * exist yet, while other calls go on; open the copy with
   * `Store.open(dest)`. The copy holds the objects live at the call, is
   * checked against the source's bytes before the promise resolves, and
   * appears under `dest` only once complete. Rejects with ALREADY_EXISTS
   * if `dest` exists (nothing is ever replaced), NOT_FOUND if its
   * directory does not exist, INVALID_ARGUMENT if it names no file,
   * CLOSED after `close()`, CORRUPT if an object fails its checksums.
   */
  backup(dest: string): Promise<BackupReport>
  /**
   * Moves objects towards the start of the store so that free space left
   * in small holes by deletes joins into large pieces, while other calls
   * go on; moved objects keep their version, creation time and expiry. A
   * put that finds no room although enough is free does this by itself.
   * Rejects with UNSUPPORTED on a read-only store, CLOSED after `close()`.
   */
  compact(): Promise<CompactReport>
  /**
   * Finishes pending commits and releases the lock. Every later call fails
   * with CLOSED: Promise calls reject, Sync calls and `has`, `stats`,
   * `listUploads`, `abortUpload` throw, `list` rejects at its first step,
   * and an Upload's `writePart`/`commit` reject. Calling `close()` or
   * `closeSync()` again does nothing, and an Upload's `abort()` succeeds.
   */
  close(): Promise<void>
  /**
   * `await using store = await Store.open(...)`: closes the store at the
   * end of the scope. Defined where the runtime has `Symbol.asyncDispose`.
   */
  [Symbol.asyncDispose](): Promise<void>
  /** Synchronous `put` (blocks the event loop; for scripts). */
  putSync(key: Key, value: Value, conditions?: PutConditions | null): ObjectInfo
  /** Synchronous `get`: `undefined` when `key` has no object. */
  getSync(key: Key): Buffer | undefined
  /** Synchronous `read`: throws NOT_FOUND when `key` has no object. */
  readSync(key: Key, offset?: number, length?: number): Buffer
  /** Synchronous `readInto` (blocks the event loop; for scripts). */
  readIntoSync(key: Key, buffer: ArrayBufferView, offset?: number): number
  /** Synchronous `stat`: throws NOT_FOUND when `key` has no object. */
  statSync(key: Key): ObjectInfo
  /** Synchronous `delete`: throws NOT_FOUND when `key` has no object. */
  deleteSync(key: Key): void
  growSync(capacity: number): void
  syncSync(): void
  backupSync(dest: string): BackupReport
  compactSync(): CompactReport
  closeSync(): void
}

/** CRC32C (Castagnoli) of `data`: the checksum `Upload.writePart` takes. */
export function crc32c(data: Uint8Array): number
