/** Options for `Store.open`. */
export interface OpenOptions {
  /**
   * Size of the store file. A new store starts at it (default 16 MiB) and
   * grows by itself as it fills, up to `maxCapacity` (a block device keeps
   * its size). At reopen a larger size grows the store; a smaller one is
   * fine when the store grew past it by itself, and refused
   * (INVALID_ARGUMENT) below a size asked for before; omitted, the store
   * keeps its size.
   */
  capacity?: number
  /**
   * Index backend: 'hash' (no listing), 'btree' or 'fst'. Stored in the
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
   * Bytes of the read cache of whole small objects (default 64 MiB; 0 turns
   * it off). `stats().cache` counts its hits.
   */
  cacheBytes?: number
}

/** Conditions of a put (at most one), and its expiry. */
export interface PutConditions {
  /** Create only: ALREADY_EXISTS if the key has an object. */
  ifAbsent?: boolean
  /** Replace only this version (`ObjectInfo.version`): VERSION_MISMATCH otherwise. */
  ifVersion?: bigint
  /**
   * Time to live in milliseconds (fractions down to 0.001, 1 µs): the
   * object expires that long after its commit. From then on reads, `stat`,
   * `has` and listings no longer see it, and its space is freed in the
   * background. Omitted, the object never expires (replacing one that
   * would have). Zero, negative, NaN, infinite, under 1 µs or above about
   * 100 years is INVALID_ARGUMENT, and so is a value that is not a number.
   */
  ttl?: number
}

/** What a commit produced, or what `stat` reports. */
export interface ObjectInfo {
  size: number
  /** Strictly larger for every later commit in the store. */
  version: bigint
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

/** Space and content figures. */
export interface Stats {
  objects: number
  logicalBytes: number
  allocatedBytes: number
  metadataBytes: number
  freeBytes: number
  capacity: number
  deviceBytesWritten: number
  userBytesWritten: number
  commitGroups: number
  ioEngine: string
  directIo: boolean
  index: string
  /** What recovery did when the store was opened. */
  recovery: Recovery
  /** The read cache since open. */
  cache: CacheStats
}

/** Reads served from the read cache and from the device, bytes held, bound. */
export interface CacheStats {
  hits: number
  misses: number
  bytes: number
  capacity: number
}

/** What recovery found and did at open. */
export interface Recovery {
  clean: boolean
  rolledBackGroups: number
  rolledBackObjects: number
  repaired: Array<string>
  details: Array<string>
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

/** An Error with the kind in `code`. */
export interface BlobcaskError extends Error {
  code: ErrorCode
}

export type Key = string | Uint8Array

/** A multipart upload: parts in any order, concurrently, then one atomic commit. */
export declare class Upload {
  /** This upload's id in `listUploads` (for `abortUpload`); still readable once committed or aborted. */
  readonly id: number
  /** Writes `data` at `offset` (a multiple of 4096). `data` is copied before this returns. */
  writePart(offset: number, data: Uint8Array, crc32c?: number): Promise<void>
  /** Makes the object visible atomically. */
  commit(): Promise<ObjectInfo>
  /** Abandons the upload and frees its space. */
  abort(): Promise<void>
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
  put(key: Key, value: Uint8Array, conditions?: PutConditions): Promise<ObjectInfo>
  /**
   * The whole object. Results over 16 KiB are Buffers over the engine's
   * read buffer (no copy); each is the caller's own, valid after the key
   * is overwritten or deleted and the store closed.
   */
  get(key: Key): Promise<Buffer>
  /** `length` bytes from `offset` (to the end when omitted), clipped at the end. */
  read(key: Key, offset?: number, length?: number): Promise<Buffer>
  /** Size, version and commit time. */
  stat(key: Key): Promise<ObjectInfo>
  /** Deletes `key` (rejects with NOT_FOUND when absent). */
  delete(key: Key): Promise<void>
  /** Whether `key` has an object (no I/O). */
  has(key: Key): boolean
  /** Keys starting with `prefix`, in order (index 'btree' or 'fst'). */
  list(prefix?: Key): AsyncIterableIterator<Buffer>
  /** Starts a multipart upload of exactly `size` bytes. */
  beginUpload(key: Key, size: number): Promise<Upload>
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
  /** Finishes pending commits and releases the lock. */
  close(): Promise<void>
  putSync(key: Key, value: Uint8Array, conditions?: PutConditions): ObjectInfo
  getSync(key: Key): Buffer
  readSync(key: Key, offset?: number, length?: number): Buffer
  statSync(key: Key): ObjectInfo
  deleteSync(key: Key): void
  growSync(capacity: number): void
  syncSync(): void
  backupSync(dest: string): BackupReport
  compactSync(): CompactReport
  closeSync(): void
}

/** CRC32C (Castagnoli) of `data`: the checksum `Upload.writePart` takes. */
export function crc32c(data: Uint8Array): number
