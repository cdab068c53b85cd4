package snapshot

import (
	"runtime"
	"sync"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/klauspost/compress/zstd"
)

// pageZstd is arrow-go's zstd codec with the encoders sized for Parquet
// pages. arrow-go gives every concurrent page compression an encoder with
// zstd's default 8 MiB window (16 MiB of history each, one per stream
// encoding at the same time) from a sync.Pool that every garbage
// collection empties, so a sink encoding partitions in parallel allocates
// and clears them again and again. A page is compressed on its own
// (EncodeAll), and pages are about write.parquet.page-size-bytes (1 MiB by
// default): a window of pageZstdWindow loses next to nothing, and the
// frames are ordinary zstd. Decoding is arrow-go's.
type pageZstd struct {
	arrowZstd
	mu   sync.Mutex
	pool map[zstd.EncoderLevel]chan *zstd.Encoder
}

// arrowZstd is what arrow-go's zstd codec implements.
type arrowZstd interface {
	compress.ErrorCodec
	compress.StreamingCodec
}

// pageZstdWindow is the match window of page compression.
const pageZstdWindow = 1 << 20

func init() {
	c, err := compress.GetCodec(compress.Codecs.Zstd)
	if err != nil {
		panic(err)
	}
	base, ok := c.(arrowZstd)
	if !ok {
		// Another arrow-go: keep its codec.
		return
	}
	compress.RegisterCodec(compress.Codecs.Zstd, &pageZstd{arrowZstd: base, pool: map[zstd.EncoderLevel]chan *zstd.Encoder{}})
}

func (z *pageZstd) Encode(dst, src []byte) []byte {
	return z.EncodeLevel(dst, src, compress.DefaultCompressionLevel)
}

func (z *pageZstd) EncodeLevel(dst, src []byte, level int) []byte {
	lvl := zstd.SpeedDefault
	if level != compress.DefaultCompressionLevel {
		lvl = zstd.EncoderLevelFromZstd(level)
	}
	z.mu.Lock()
	pool := z.pool[lvl]
	if pool == nil {
		// Encoders are kept for as many compressions as can run at once.
		pool = make(chan *zstd.Encoder, runtime.GOMAXPROCS(0))
		z.pool[lvl] = pool
	}
	z.mu.Unlock()
	var enc *zstd.Encoder
	select {
	case enc = <-pool:
	default:
		// The options are arrow-go's, but for the window.
		enc, _ = zstd.NewWriter(nil, zstd.WithZeroFrames(true), zstd.WithEncoderLevel(lvl), zstd.WithEncoderConcurrency(1),
			zstd.WithAllLitEntropyCompression(true), zstd.WithWindowSize(pageZstdWindow))
	}
	out := enc.EncodeAll(src, dst[:0])
	select {
	case pool <- enc:
	default:
	}
	return out
}
