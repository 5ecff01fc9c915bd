// Builds the native addon with cargo and puts it where the generated loader
// (index.js) looks for it. Runs on `npm install`, so installing this package
// from source needs only Rust and Node (not the napi CLI, which is used to
// regenerate index.js and index.d.ts: `npm run generate`).
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
if (!suffix) {
  console.error(`blobcask: no build recipe for ${process.platform}-${process.arch}`)
  process.exit(1)
}
execFileSync('cargo', ['build', '--release', '--locked', '--manifest-path', manifest, '-p', 'blobcask-node'], {
  stdio: 'inherit',
})
const meta = JSON.parse(
  execFileSync('cargo', ['metadata', '--format-version', '1', '--no-deps', '--manifest-path', manifest]).toString(),
)
const lib = process.platform === 'darwin' ? 'libblobcask_node.dylib' : 'libblobcask_node.so'
fs.copyFileSync(path.join(meta.target_directory, 'release', lib), path.join(here, `blobcask.${suffix}.node`))
console.log(`blobcask: built blobcask.${suffix}.node`)
