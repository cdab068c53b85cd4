package snapshot_test

import (
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

func partitionBy(t testing.TB, spec string) *mapping.PartitionBy {
	t.Helper()
	p, err := mapping.ParsePartitionBy(spec)
	if err != nil {
		t.Fatal(err)
	}
	return &p
}

// liveFile is a live data file of a snapshot with its partition spec and
// values, from the manifests.
type liveFile struct {
	path      string
	addedBy   int64
	spec      int32
	partition string // field=value, in spec order
}

func liveFiles(t testing.TB, tbl *snapshot.Table, snapshotID int64) []liveFile {
	t.Helper()
	fsys, err := tbl.Iceberg().FS(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	meta := tbl.Iceberg().Metadata()
	manifests, err := meta.SnapshotByID(snapshotID).Manifests(fsys)
	if err != nil {
		t.Fatal(err)
	}
	var out []liveFile
	for _, m := range manifests {
		entries, err := m.FetchEntries(fsys, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			df := e.DataFile()
			spec := meta.PartitionSpecByID(int(df.SpecID()))
			var vals []string
			for _, pf := range spec.Fields() {
				vals = append(vals, fmt.Sprintf("%s=%v", pf.Name, df.Partition()[pf.FieldID]))
			}
			out = append(out, liveFile{path: df.FilePath(), addedBy: e.SnapshotID(), spec: df.SpecID(), partition: strings.Join(vals, ",")})
		}
	}
	return out
}

// specOf writes the table's current spec as field names.
func specOf(tbl *snapshot.Table) string {
	spec := tbl.Iceberg().Spec()
	var names []string
	for _, pf := range spec.Fields() {
		names = append(names, pf.Name)
	}
	return strings.Join(names, ",")
}

// TestPartitionFieldsArriveWithTheirColumns: a typed table is created with
// the partition fields of the columns it has; a field on a value column is
// added by the commit whose schema change creates the column, in the same
// metadata version, and that commit's files are already partitioned by it.
func TestPartitionFieldsArriveWithTheirColumns(t *testing.T) {
	l := mapping.Layout{Value: mapping.ValueJSON}
	pb := partitionBy(t, "identity(kafka_partition), bucket(4, customer), day(placed_at), bucket(2, id)")
	tbl := openTestTable(t, tempCatalog(t), "lake.typed", snapshot.OpenOptions{Create: true, Layout: l, PartitionBy: pb})
	if got := specOf(tbl); got != "kafka_partition" {
		t.Fatalf("new table's spec: %s", got)
	}
	if got := tbl.Iceberg().Properties()[mapping.PropPartitionBy]; got != pb.String() {
		t.Fatalf("%s = %q", mapping.PropPartitionBy, got)
	}
	pending, err := tbl.PendingPartitionFields()
	if err != nil || fmt.Sprint(pending) != "[bucket(4, customer) day(placed_at) bucket(2, id)]" {
		t.Fatalf("pending fields %v, %v", pending, err)
	}
	str, long, ts := iceberg.PrimitiveTypes.String, iceberg.PrimitiveTypes.Int64, iceberg.PrimitiveTypes.TimestampTz
	// id is an int first, a long later: a promotion of a partition source.
	v1 := &iceberg.StructType{FieldList: []iceberg.NestedField{{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int32}, {ID: 2, Name: "customer", Type: str}}}
	commit := func(f snapshot.Flush) int64 {
		t.Helper()
		versions := countSeq(tbl.Iceberg().Metadata().PreviousFiles())
		if _, err := tbl.Commit(t.Context(), f, snapshot.CommitOptions{Writer: "test"}); err != nil {
			t.Fatal(err)
		}
		// One metadata version per commit: the schema change, the spec
		// change and the snapshot land together.
		if got := countSeq(tbl.Iceberg().Metadata().PreviousFiles()); got != versions+1 {
			t.Fatalf("the commit wrote %d metadata versions, want 1", got-versions)
		}
		return tbl.Head().SnapshotID
	}
	var rows []map[string]any
	for i := range 12 {
		rows = append(rows, map[string]any{"id": int32(i), "customer": fmt.Sprintf("c%d", i%6)})
	}
	first := commit(typedFlush(t, l, v1, 0, rows...))
	if got := specOf(tbl); got != "kafka_partition,customer_bucket_4,id_bucket_2" {
		t.Fatalf("spec after customer appeared: %s", got)
	}
	checkPure(t, tbl, first, 3)

	v2 := &iceberg.StructType{FieldList: []iceberg.NestedField{{ID: 1, Name: "id", Type: long}, {ID: 2, Name: "customer", Type: str}, {ID: 3, Name: "placed_at", Type: ts}}}
	day := time.Date(2024, 5, 1, 22, 0, 0, 0, time.UTC)
	rows = rows[:0]
	for i := range 8 {
		rows = append(rows, map[string]any{"id": int64(i), "customer": "c1", "placed_at": mapping.TimestampOf(day.Add(time.Duration(i) * time.Hour))})
	}
	second := commit(typedFlush(t, l, v2, 12, rows...))
	if got := specOf(tbl); got != "kafka_partition,customer_bucket_4,id_bucket_2,placed_at_day" {
		t.Fatalf("spec after placed_at appeared: %s", got)
	}
	if f, _ := tbl.Iceberg().Schema().FindFieldByName("id"); !f.Type.Equals(long) {
		t.Fatalf("id is a %s after the promotion", f.Type)
	}
	_, it, err := tbl.Iceberg().Scan(table.WithSelectedFields("id", "placed_at")).ToArrowRecords(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	read := 0
	for b, err := range it {
		if err != nil {
			t.Fatal(err)
		}
		read += int(b.NumRows())
		b.Release()
	}
	if read != 20 {
		t.Fatalf("read %d rows back, want 20", read)
	}
	if pending, _ := tbl.PendingPartitionFields(); len(pending) != 0 {
		t.Fatalf("still pending: %v", pending)
	}
	// The first snapshot had neither the column nor the field.
	meta := tbl.Iceberg().Metadata()
	if s := meta.SnapshotByID(first); s.SchemaID == nil || slices.ContainsFunc(meta.Schemas(), func(sc *iceberg.Schema) bool {
		_, has := sc.FindFieldByName("placed_at")
		return sc.ID == *s.SchemaID && has
	}) {
		t.Fatal("the first snapshot's schema has placed_at")
	}
	files := checkPure(t, tbl, second, 4)
	days := map[string]bool{}
	for _, f := range files {
		if f.addedBy == second {
			days[f.partition] = true
		}
	}
	// 22:00 on May 1 to 05:00 on May 2: two days, one customer bucket,
	// two id buckets at most.
	if len(days) < 2 || len(days) > 4 {
		t.Fatalf("second commit's files: %v", files)
	}
}

func countSeq[T any](seq iter.Seq[T]) int {
	n := 0
	for range seq {
		n++
	}
	return n
}

// checkPure checks that every file a snapshot added has the spec the table
// had after it, and that the files of one commit have distinct partition
// values; the spec has want fields.
func checkPure(t testing.TB, tbl *snapshot.Table, snapshotID int64, want int) []liveFile {
	t.Helper()
	files := liveFiles(t, tbl, snapshotID)
	seen := map[string]bool{}
	for _, f := range files {
		if f.addedBy != snapshotID {
			continue
		}
		if f.spec != int32(tbl.Iceberg().Metadata().DefaultPartitionSpec()) || strings.Count(f.partition, "=") != want {
			t.Fatalf("file of snapshot %d has spec %d (%s); the table's is %d", snapshotID, f.spec, f.partition, tbl.Iceberg().Metadata().DefaultPartitionSpec())
		}
		if seen[f.partition] {
			t.Fatalf("two files of snapshot %d in partition %s: files are written per Kafka partition, each partition value once", snapshotID, f.partition)
		}
		seen[f.partition] = true
	}
	return files
}

// TestPartitionColumnOfWrongType: a value column that appears with a type
// its requested transform does not take stops the commit; nothing lands.
func TestPartitionColumnOfWrongType(t *testing.T) {
	l := mapping.Layout{Value: mapping.ValueJSON}
	tbl := openTestTable(t, tempCatalog(t), "lake.typed", snapshot.OpenOptions{Create: true, Layout: l, PartitionBy: partitionBy(t, "day(placed_at)")})
	v1 := &iceberg.StructType{FieldList: []iceberg.NestedField{{ID: 1, Name: "placed_at", Type: iceberg.PrimitiveTypes.String}}}
	_, err := tbl.Commit(t.Context(), typedFlush(t, l, v1, 0, map[string]any{"placed_at": "yesterday"}), snapshot.CommitOptions{Writer: "test"})
	var pe *mapping.PartitionByError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "column placed_at is a string, which day does not take") || !strings.Contains(err.Error(), "lake.typed") {
		t.Fatalf("commit: %v; want a *mapping.PartitionByError naming the column and its type", err)
	}
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, has := tbl.Iceberg().Schema().FindFieldByName("placed_at"); has || tbl.Head() != nil {
		t.Fatal("the refused commit changed the table")
	}
}

// TestPartitionSpecEvolution: asking an existing table for another spec
// evolves it (files written before keep theirs); asking for the same, or
// for none, changes nothing.
func TestPartitionSpecEvolution(t *testing.T) {
	cat := tempCatalog(t)
	hour := partitionBy(t, "hour(kafka_timestamp)")
	tbl := openTestTable(t, cat, "lake.evolve", snapshot.OpenOptions{Create: true, PartitionBy: hour})
	// Two hours apart: two files of partition 0.
	commitRecs(t, tbl, map[int32]mapping.Interval{0: {Low: 0, High: 2}}, testRec{partition: 0, offset: 0, value: "a"}, testRec{partition: 0, offset: 1, value: "b", sec: 7200})
	first := tbl.Head().SnapshotID
	loc := tbl.Iceberg().MetadataLocation()
	for _, opts := range []snapshot.OpenOptions{{}, {PartitionBy: hour}} {
		if again := openTestTable(t, cat, "lake.evolve", opts); again.Iceberg().MetadataLocation() != loc {
			t.Fatalf("opening with %v changed the table", opts.PartitionBy)
		}
	}
	tbl = openTestTable(t, cat, "lake.evolve", snapshot.OpenOptions{PartitionBy: partitionBy(t, "day(kafka_timestamp), identity(kafka_partition)")})
	if got := specOf(tbl); got != "kafka_timestamp_day,kafka_partition" {
		t.Fatalf("evolved spec: %s", got)
	}
	if tbl.Head().SnapshotID != first {
		t.Fatal("the spec change wrote a snapshot")
	}
	commitRecs(t, tbl, map[int32]mapping.Interval{0: {Low: 2, High: 4}}, testRec{partition: 0, offset: 2, value: "c"}, testRec{partition: 0, offset: 3, value: "d", sec: 1800})
	specs := map[int32]int{}
	for _, f := range liveFiles(t, tbl, tbl.Head().SnapshotID) {
		specs[f.spec]++
	}
	if len(specs) != 2 || specs[0] != 2 || specs[1] != 1 {
		t.Fatalf("files per spec: %v; want 2 of the old spec (two hours) and 1 of the new (one day)", specs)
	}
	if got := snapshotRows(t, tbl, 0); len(got) != 4 {
		t.Fatalf("rows: %v", got)
	}
	tbl = openTestTable(t, cat, "lake.evolve", snapshot.OpenOptions{PartitionBy: partitionBy(t, "none")})
	if got := tbl.Iceberg().Spec(); !got.IsUnpartitioned() || tbl.Iceberg().Properties()[mapping.PropPartitionBy] != "none" {
		t.Fatalf("spec after none: %v", got)
	}
}

// TestCommitRewritesForANewSpec: a writer whose files were written for a
// spec another writer has since changed writes them again for the new
// one when its commit retries.
func TestCommitRewritesForANewSpec(t *testing.T) {
	cat := tempCatalog(t)
	a := openTestTable(t, cat, "lake.race", snapshot.OpenOptions{Create: true})
	b := openTestTable(t, cat, "lake.race", snapshot.OpenOptions{PartitionBy: partitionBy(t, "identity(kafka_key)")})
	commitRecs(t, b, map[int32]mapping.Interval{1: {Low: 0, High: 1}}, testRec{partition: 1, offset: 0, key: "x", value: "b"})
	// a still has the unpartitioned table: its first attempt loses the
	// race, and its files are written again for b's spec.
	commitRecs(t, a, map[int32]mapping.Interval{0: {Low: 0, High: 2}}, testRec{partition: 0, offset: 0, key: "k1", value: "a"}, testRec{partition: 0, offset: 1, key: "k2", value: "a"})
	files := checkPure(t, a, a.Head().SnapshotID, 1)
	if len(files) != 3 {
		t.Fatalf("files: %v", files)
	}
	for _, f := range files {
		if f.spec != 1 {
			t.Fatalf("file %s has spec %d", f.path, f.spec)
		}
	}
	if got := snapshotRows(t, a, 0); len(got) != 3 {
		t.Fatalf("rows: %v", got)
	}
}

// TestWriterSwitchesToANewSpec: a writer that commits after another
// process changed the spec (which moves no branch head, so nothing
// conflicts) commits its files under the spec they were written with,
// which they name, and writes its next flush with the new spec.
func TestWriterSwitchesToANewSpec(t *testing.T) {
	cat := tempCatalog(t)
	a := openTestTable(t, cat, "lake.switch", snapshot.OpenOptions{Create: true})
	openTestTable(t, cat, "lake.switch", snapshot.OpenOptions{PartitionBy: partitionBy(t, "identity(kafka_key)")})
	commitRecs(t, a, map[int32]mapping.Interval{0: {Low: 0, High: 2}}, testRec{partition: 0, offset: 0, key: "k1", value: "a"}, testRec{partition: 0, offset: 1, key: "k2", value: "a"})
	first := a.Head().SnapshotID
	commitRecs(t, a, map[int32]mapping.Interval{0: {Low: 2, High: 4}}, testRec{partition: 0, offset: 2, key: "k1", value: "b"}, testRec{partition: 0, offset: 3, key: "k2", value: "b"})
	specs := map[int64][]int32{}
	for _, f := range liveFiles(t, a, a.Head().SnapshotID) {
		specs[f.addedBy] = append(specs[f.addedBy], f.spec)
	}
	if fmt.Sprint(specs[first]) != "[0]" || fmt.Sprint(specs[a.Head().SnapshotID]) != "[1 1]" {
		t.Fatalf("specs of the files per snapshot: %v", specs)
	}
	if got := snapshotRows(t, a, 0); len(got) != 4 {
		t.Fatalf("rows: %v", got)
	}
}

// TestPartitionByNestedField: a field of a struct column, as a dotted
// path, partitions like a top-level column once the struct appears.
func TestPartitionByNestedField(t *testing.T) {
	l := mapping.Layout{Value: mapping.ValueJSON}
	tbl := openTestTable(t, tempCatalog(t), "lake.nested", snapshot.OpenOptions{Create: true, Layout: l, PartitionBy: partitionBy(t, "day(order.placed_at)")})
	v1 := &iceberg.StructType{FieldList: []iceberg.NestedField{{ID: 1, Name: "order", Type: &iceberg.StructType{FieldList: []iceberg.NestedField{
		{ID: 2, Name: "placed_at", Type: iceberg.PrimitiveTypes.TimestampTz}, {ID: 3, Name: "sku", Type: iceberg.PrimitiveTypes.String}}}}}}
	day := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	var rows []map[string]any
	for i := range 6 {
		rows = append(rows, map[string]any{"order": map[string]any{"placed_at": mapping.TimestampOf(day.Add(time.Duration(i) * 12 * time.Hour)), "sku": "s"}})
	}
	rows = append(rows, map[string]any{"order": nil})
	if _, err := tbl.Commit(t.Context(), typedFlush(t, l, v1, 0, rows...), snapshot.CommitOptions{Writer: "test"}); err != nil {
		t.Fatal(err)
	}
	if got := specOf(tbl); got != "order_placed_at_day" {
		t.Fatalf("spec: %s", got)
	}
	// Four days and the null partition of the row without an order.
	files := checkPure(t, tbl, tbl.Head().SnapshotID, 1)
	if len(files) != 5 {
		t.Fatalf("files: %v", files)
	}
}
