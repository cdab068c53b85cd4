// Reads an Iceberg table with icebird, which applies v2 equality and
// position deletes, and prints its live rows as JSON lines.
//
// Usage: node read.mjs METADATA_JSON_PATH
//
// The table is named by the path of its current metadata.json on a file
// warehouse. Node's fetch has no file:// scheme, so file:// URLs (the
// locations of manifests and data files) are served from disk here,
// honouring the Range requests hyparquet makes. Values print as JSON:
// 64-bit integers as numbers when exact, else strings; bytes as base64
// (hyparquet hands a binary column without a logical type over as text,
// which prints as it is); timestamps as ISO-8601 strings.
import { readFileSync, openSync, readSync, closeSync, fstatSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { icebergRead } from 'icebird'

const [metadataPath] = process.argv.slice(2)
if (!metadataPath) {
  console.error('usage: node read.mjs METADATA_JSON_PATH')
  process.exit(2)
}

const netFetch = globalThis.fetch
globalThis.fetch = async (input, init) => {
  const url = typeof input === 'string' ? input : input.url
  if (!url.startsWith('file:')) return netFetch(input, init)
  const fd = openSync(fileURLToPath(url), 'r')
  try {
    const size = fstatSync(fd).size
    if (init?.method === 'HEAD') {
      return new Response(null, { status: 200, headers: { 'Content-Length': String(size) } })
    }
    const range = new Headers(init?.headers).get('Range')
    let start = 0
    let end = size - 1
    const m = range && /^bytes=(\d+)-(\d*)$/.exec(range)
    if (m) {
      start = Number(m[1])
      if (m[2] !== '') end = Math.min(Number(m[2]), size - 1)
    }
    const buf = Buffer.alloc(Math.max(0, end - start + 1))
    readSync(fd, buf, 0, buf.length, start)
    return new Response(buf, {
      status: m ? 206 : 200,
      headers: { 'Content-Length': String(buf.length) },
    })
  } finally {
    closeSync(fd)
  }
}

const metadata = JSON.parse(readFileSync(metadataPath, 'utf8'))
const rows = await icebergRead({ tableUrl: metadata.location, metadata })

const json = (_, v) => {
  if (typeof v === 'bigint') return Number.isSafeInteger(Number(v)) ? Number(v) : String(v)
  if (v instanceof Uint8Array) return Buffer.from(v).toString('base64')
  return v
}
const out = []
for (const row of rows) out.push(JSON.stringify(row, json))
process.stdout.write(out.length ? out.join('\n') + '\n' : '')
