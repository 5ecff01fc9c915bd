// Helpers shared by the Node test files (no tests here).
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { Store } from '../lib.mjs'

/** A store path in a fresh temporary directory, and a way to remove it. */
export function tempPath() {
  const dir = mkdtempSync(join(tmpdir(), 'blobcask-node-'))
  return { path: join(dir, 'store.blobcask'), cleanup: () => rmSync(dir, { recursive: true, force: true }) }
}

/** Runs `fn(store, path)` on a fresh 64 MiB store (options override), then closes and removes it. */
export async function withStore(options, fn) {
  const t = tempPath()
  let store
  try {
    store = await Store.open(t.path, { capacity: 64 * 1024 * 1024, ...options })
  } catch (e) {
    t.cleanup()
    throw e
  }
  try {
    await fn(store, t.path)
  } finally {
    await store.close()
    t.cleanup()
  }
}
