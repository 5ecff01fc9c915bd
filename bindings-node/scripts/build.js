// Builds the native addon with cargo and puts it where the generated loader
// (index.js) looks for it. Runs on `npm install` in the repository, so
// installing this package from source needs only Rust and Node (not the napi
// CLI, which is used to regenerate index.js and index.d.ts: `npm run
// generate`), and again before `npm pack` (prepack), so a tarball always
// carries a fresh addon.
//
// The addon is linked without debug info or symbol table (`-C strip=symbols`
// on the addon crate only: the release profile has no debug info, and the
// dependencies stay shared with other release builds).
//
// A package installed from the tarball (`npm pack`) has no Rust sources: it
// ships the prebuilt addon, and this script only checks that it is there; it
// never looks for cargo or a workspace.
'use strict'
const { execFileSync } = require('child_process')
const fs = require('fs')
const path = require('path')

const here = path.resolve(__dirname, '..')
const manifest = path.join(here, 'Cargo.toml')
const triples = {
  'linux-x64': 'linux-x64-gnu',
  'linux-arm64': 'linux-arm64-gnu',
  'darwin-x64': 'darwin-x64',
  'darwin-arm64': 'darwin-arm64',
}
const suffix = triples[`${process.platform}-${process.arch}`]
const addon = suffix && path.join(here, `blobcask.${suffix}.node`)

if (!fs.existsSync(manifest)) {
  // Installed from a packed tarball: use the addon it ships.
  if (addon && fs.existsSync(addon)) {
    console.log(`blobcask: using the prebuilt ${path.basename(addon)}`)
    process.exit(0)
  }
  console.error(
    `blobcask: this package ships no prebuilt addon for ${process.platform}-${process.arch}; ` +
      'build it from the source repository (cd bindings-node && npm install)',
  )
  process.exit(1)
}

if (!suffix) {
  console.error(`blobcask: no build recipe for ${process.platform}-${process.arch}`)
  process.exit(1)
}
execFileSync(
  'cargo',
  ['rustc', '--release', '--locked', '--manifest-path', manifest, '-p', 'blobcask-node', '--lib', '--', '-C', 'strip=symbols'],
  { stdio: 'inherit' },
)
const meta = JSON.parse(
  execFileSync('cargo', ['metadata', '--format-version', '1', '--no-deps', '--manifest-path', manifest]).toString(),
)
const lib = process.platform === 'darwin' ? 'libblobcask_node.dylib' : 'libblobcask_node.so'
fs.copyFileSync(path.join(meta.target_directory, 'release', lib), addon)
console.log(`blobcask: built ${path.basename(addon)}`)
