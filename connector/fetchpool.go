package connector

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// fetchPool lends the consumer the slices it decodes fetched records into
// and decompresses batches into (kgo.WithPools), and takes them back when
// a poll's records are recycled. A sink copies every record it keeps into
// Arrow builders within the poll that returned it, so nothing of a record
// outlives its poll: without the pool each fetch's records and
// decompressed batches are fresh memory that the runtime clears and the
// collector traces and frees again.
//
// Slices of any size are pooled together: a decompression that needs more
// room than it got grows the slice, and franz-go pools the grown one.
type fetchPool struct {
	records sync.Pool // *[]kgo.Record
	bytes   sync.Pool // *[]byte
}

var (
	_ kgo.PoolRecords         = (*fetchPool)(nil)
	_ kgo.PoolDecompressBytes = (*fetchPool)(nil)
)

func (p *fetchPool) GetRecords(n int) []kgo.Record {
	if v, _ := p.records.Get().(*[]kgo.Record); v != nil && cap(*v) >= n {
		return (*v)[:n]
	}
	return make([]kgo.Record, n)
}

func (p *fetchPool) PutRecords(rs []kgo.Record) { p.records.Put(&rs) }

func (p *fetchPool) GetDecompressBytes(compressed []byte, _ kgo.CompressionCodecType) []byte {
	if v, _ := p.bytes.Get().(*[]byte); v != nil {
		return *v
	}
	// Kafka payloads compress about four to one.
	return make([]byte, 0, 4*len(compressed))
}

func (p *fetchPool) PutDecompressBytes(b []byte) { p.bytes.Put(&b) }
