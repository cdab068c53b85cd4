// Patches icebird 0.3.1 after install (npm ci runs it as postinstall).
//
// Avro's "deflate" codec is raw DEFLATE (RFC 1951, no header), which is what
// iceberg-go writes its manifests and manifest lists with. icebird inflates
// those blocks with hyparquet-compressors' gunzip, which expects a gzip
// header, so it cannot read a table floe wrote. The patch inflates them with
// node:zlib's inflateRawSync instead. It is idempotent and fails loudly when
// the text it replaces is not there (another icebird version).
import { readFileSync, writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

const file = fileURLToPath(new URL('./node_modules/icebird/src/avro/avro.read.js', import.meta.url))
const marker = '// floe: raw deflate'
let src = readFileSync(file, 'utf8')
if (!src.includes(marker)) {
  const from = ["import { gunzip } from 'hyparquet-compressors'", 'data = gunzip(data)']
  const to = [
    `import { inflateRawSync } from 'node:zlib' ${marker}`,
    'data = new Uint8Array(inflateRawSync(data))',
  ]
  for (let i = 0; i < from.length; i++) {
    if (!src.includes(from[i])) {
      throw new Error(`icebird patch: "${from[i]}" not found in ${file}; is icebird still 0.3.1?`)
    }
    src = src.replace(from[i], to[i])
  }
  writeFileSync(file, src)
}
