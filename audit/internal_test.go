package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/mapping"
)

// TestOffsetSet checks the paged bitset against a map, across page
// boundaries and for negative offsets (a corrupted file may hold any).
func TestOffsetSet(t *testing.T) {
	s := newOffsetSet()
	ref := map[int64]bool{}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20_000 {
		o := rng.Int64N(3*pageBits) - pageBits
		if rng.IntN(10) == 0 {
			o += 1 << 40 // far away: a page of its own
		}
		if dup := s.add(o); dup != ref[o] {
			t.Fatalf("add(%d) dup %v, want %v", o, dup, ref[o])
		}
		ref[o] = true
	}
	for range 2000 {
		lo := rng.Int64N(4*pageBits) - 2*pageBits
		iv := mapping.Interval{Low: lo, High: lo + rng.Int64N(2*pageBits)}
		var want int64
		for o := range ref {
			if iv.Contains(o) {
				want++
			}
		}
		if got := s.count(iv); got != want {
			t.Fatalf("count(%s) = %d, want %d", iv, got, want)
		}
	}
	var want []int64
	for o := range ref {
		want = append(want, o)
	}
	slices.Sort(want)
	var got []int64
	ivs := s.intervals()
	for i, iv := range ivs {
		if i > 0 && ivs[i-1].High >= iv.Low {
			t.Fatalf("intervals %s and %s are not disjoint and merged", ivs[i-1], iv)
		}
		for o := iv.Low; o < iv.High; o++ {
			got = append(got, o)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("intervals hold %d offsets, want %d", len(got), len(want))
	}
}

// TestCanonical pins the canonical form of the evidence digest: changing it
// breaks every archived digest, so it needs a new header version.
func TestCanonical(t *testing.T) {
	l := mapping.Ledger{Commits: []mapping.Commit{
		{SnapshotID: 11, CommittedAt: time.UnixMilli(1700000000123), ID: "c-1", Writer: `host:1 "a"`, Ranges: []mapping.Range{
			{TopicPartition: mapping.TopicPartition{Topic: "orders", Partition: 1}, Interval: mapping.Interval{Low: 0, High: 10}, Records: 9},
			{TopicPartition: mapping.TopicPartition{Topic: "orders", Partition: 0}, Interval: mapping.Interval{Low: 0, High: 5}, Lost: true},
		}},
		{SnapshotID: 12, CommittedAt: time.UnixMilli(1700000000456), ID: "c-2", Writer: "w", Ranges: []mapping.Range{
			{TopicPartition: mapping.TopicPartition{Topic: "orders", Partition: 0}, Interval: mapping.Interval{Low: 5, High: 8}, Records: 3},
			{TopicPartition: mapping.TopicPartition{Topic: "orders", Partition: 1}, Interval: mapping.Interval{Low: 10, High: 14}, Aborted: true},
			{TopicPartition: mapping.TopicPartition{Topic: "orders", Partition: 2}, Interval: mapping.Interval{Low: 7, High: 7}},
		}, TopicIDs: map[string]string{"orders": "8bMxWQbKQ0yJDWexrLrJWA"}},
	}}
	want := "floe-audit-evidence/2\n" +
		"metadata s3://lake/t/metadata/00002.metadata.json\n" +
		"commit 11 1700000000123 \"c-1\" \"host:1 \\\"a\\\"\"\n" +
		"lost orders 0 0 5\n" +
		"range orders 1 0 10 9\n" +
		"commit 12 1700000000456 \"c-2\" \"w\"\n" +
		"topic-id orders 8bMxWQbKQ0yJDWexrLrJWA\n" +
		"range orders 0 5 8 3\n" +
		"aborted orders 1 10 14\n" +
		"range orders 2 7 7 0\n"
	got := string(Canonical("s3://lake/t/metadata/00002.metadata.json", l))
	if got != want {
		t.Fatalf("canonical form:\n%s\nwant:\n%s", got, want)
	}
	sum := sha256.Sum256([]byte(want))
	if e := evidence("s3://lake/t/metadata/00002.metadata.json", 12, l); e.Digest != "sha256:"+hex.EncodeToString(sum[:]) || e.Commits != 2 {
		t.Fatalf("evidence %+v", e)
	}
	// File groups say where rows are, not which offsets the ledger
	// covers: they leave the canonical form, and old digests, unchanged.
	l.Commits[1].FileGroups = []mapping.FileGroup{{Files: []string{"s3://lake/t/data/g.parquet"},
		Spans: []mapping.Span{{TopicPartition: mapping.TopicPartition{Topic: "orders", Partition: 0}, Interval: mapping.Interval{Low: 5, High: 8}}}}}
	if got := string(Canonical("s3://lake/t/metadata/00002.metadata.json", l)); got != want {
		t.Fatalf("file groups changed the canonical form:\n%s", got)
	}
}

// TestContentColumnsNotShared checks that a caller changing the column list
// it was given does not change what the next content scan reads.
func TestContentColumnsNotShared(t *testing.T) {
	want := []string{mapping.ColOffset, mapping.ColTimestamp, mapping.ColKey, mapping.ColHeaders, mapping.ColValue}
	cols := contentColumns(mapping.ColValue)
	if !slices.Equal(cols, want) {
		t.Fatalf("contentColumns() = %q, want %q", cols, want)
	}
	cols[0] = "changed"
	_ = append(cols[:1], "appended")
	if got := contentColumns(mapping.ColValue); !slices.Equal(got, want) {
		t.Fatalf("after a caller changed its copy, contentColumns() = %q, want %q", got, want)
	}
}

// TestTypedRowEmptyJSONIsNull: in a schemaless JSON table an empty list
// and a struct of nulls digest as null (the sink now writes null for such
// values wherever it sinks them; rows sunk before hold them where the
// column existed), and the content audit matches those rows with their
// records. In a registry table an empty list is a value of its own.
func TestTypedRowEmptyJSONIsNull(t *testing.T) {
	sc := arrow.NewSchema([]arrow.Field{
		{Name: mapping.ColTimestamp, Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
		{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true},
		{Name: "s", Type: arrow.StructOf(arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int64, Nullable: true}), Nullable: true},
	}, nil)
	rb := array.NewRecordBuilder(memory.NewGoAllocator(), sc)
	defer rb.Release()
	l, s := rb.Field(1).(*array.ListBuilder), rb.Field(2).(*array.StructBuilder)
	x := s.FieldBuilder(0).(*array.Int64Builder)
	for i := range 3 {
		rb.Field(0).(*array.TimestampBuilder).Append(1)
		switch i {
		case 0: // sunk before the columns existed
			l.AppendNull()
			s.AppendNull()
		case 1: // the same record sunk after, by a floe before this rule
			l.Append(true)
			s.Append(true)
			x.AppendNull()
		case 2:
			l.Append(true)
			l.ValueBuilder().(*array.Int64Builder).Append(1)
			s.Append(true)
			x.Append(1)
		}
	}
	b := rb.NewRecordBatch()
	defer b.Release()
	sums := func(layout mapping.Layout) (out [3]digest) {
		var d digester
		for i := range 3 {
			sum, err := d.typedRow(b, i, layout)
			if err != nil {
				t.Fatal(err)
			}
			out[i] = sum
		}
		return out
	}
	if got := sums(mapping.Layout{Value: mapping.ValueJSON}); got[0] != got[1] || got[1] == got[2] {
		t.Errorf("JSON table: null and empty rows digest alike: %v, empty and a value differ: %v", got[0] == got[1], got[1] != got[2])
	}
	if got := sums(mapping.Layout{Value: mapping.ValueRegistry}); got[0] == got[1] {
		t.Error("registry table: an empty list and a struct of nulls digest like null")
	}
}
