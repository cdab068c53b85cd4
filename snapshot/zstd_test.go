package snapshot

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/compress"
)

// TestPageZstd: pages compressed with floe's zstd encoders, larger than
// their window too, decode with arrow-go's decoder to what they were.
func TestPageZstd(t *testing.T) {
	c, err := compress.GetCodec(compress.Codecs.Zstd)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.(*pageZstd); !ok {
		t.Fatalf("the zstd codec is %T, not floe's", c)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 100, 1 << 20, 3<<20 + 17} {
		src := make([]byte, n)
		for i := range src {
			// Compressible, not trivially: runs of random letters.
			if i%64 == 0 || i == 0 {
				src[i] = byte('a' + rng.IntN(26))
			} else {
				src[i] = src[i-1]
			}
		}
		for _, level := range []int{compress.DefaultCompressionLevel, 1, 3} {
			enc := c.EncodeLevel(nil, src, level)
			got := c.Decode(make([]byte, 0, n), enc)
			if !bytes.Equal(got, src) {
				t.Fatalf("%d bytes at level %d: decoded %d bytes that differ", n, level, len(got))
			}
			if n > 0 && len(enc) >= n {
				t.Errorf("%d bytes at level %d compressed to %d", n, level, len(enc))
			}
		}
	}
}
