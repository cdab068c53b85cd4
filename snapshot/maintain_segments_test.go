package snapshot_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// namedArchives returns the ledger archive files the table names: its
// segments and the archive of floe before segments, by property key.
func namedArchives(tbl *snapshot.Table) []string {
	props := tbl.Iceberg().Properties()
	var files []string
	for _, k := range slices.Sorted(maps.Keys(props)) {
		if k == snapshot.PropLedgerArchive || strings.HasPrefix(k, snapshot.PropLedgerSegmentPrefix) {
			files = append(files, props[k])
		}
	}
	return files
}

// readArchiveFile reads one archive file of the file warehouse.
func readArchiveFile(t *testing.T, path string) snapshot.Archive {
	t.Helper()
	b, err := os.ReadFile(strings.TrimPrefix(path, "file://"))
	if err != nil {
		t.Fatal(err)
	}
	var a snapshot.Archive
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatal(err)
	}
	return a
}

// nameOnly commits a table version whose archive is the one file path,
// named as floe before segments named it (PropLedgerArchive), and no
// segment: a table as such a floe left it.
func nameOnly(t *testing.T, tbl *snapshot.Table, path string) {
	t.Helper()
	txn := tbl.Iceberg().NewTransaction()
	var keys []string
	for k := range tbl.Iceberg().Properties() {
		if strings.HasPrefix(k, snapshot.PropLedgerSegmentPrefix) {
			keys = append(keys, k)
		}
	}
	if err := txn.RemoveProperties(keys); err != nil {
		t.Fatal(err)
	}
	if err := txn.SetProperties(map[string]string{snapshot.PropLedgerArchive: path}); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestSegmentsMerge: expiry after expiry, each naming a new segment, the
// table names few segments (each absorbs the newest ones while it holds a
// quarter of their entries), the files of absorbed segments are deleted,
// and the ledger reads whole all along.
func TestSegmentsMerge(t *testing.T) {
	tbl, _ := maintainTable(t, 2)
	const runs = 40
	maxNamed := 0
	for i := range runs {
		commitRanges(t, tbl, 2+2*i, 4+2*i)
		res, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 2})
		if err != nil {
			t.Fatal(err)
		}
		if res.Archived != 2*(i+1) {
			t.Fatalf("run %d archived %d snapshots, want %d", i, res.Archived, 2*(i+1))
		}
		maxNamed = max(maxNamed, len(res.Segments))
		if files := archiveFiles(t, tbl); len(files) != len(res.Segments) {
			t.Fatalf("run %d: %d files in the archive folder, %d named: absorbed segments were not deleted", i, len(files), len(res.Segments))
		}
		if l := freshLedger(t, tbl); len(l.Commits) != 4+2*i {
			t.Fatalf("run %d: ledger has %d commits, want %d", i, len(l.Commits), 4+2*i)
		}
	}
	// 80 entries in batches of 2: at most 1+log4(40), about 3.7.
	if maxNamed > 4 {
		t.Fatalf("the table named up to %d segments, want at most 4", maxNamed)
	}
}

// TestReaderOutlivesAbsorbedSegment: a reader opens the table while it
// names segment S; another process's expiry then writes a segment that
// absorbs S and deletes S's files. The reader, which reads segment blocks
// on demand, finds S gone when it walks the ledger: it must reload the
// table and read the whole ledger as of the head it loaded, not fail on
// "no such file" (CI saw that in TestConcurrentMaintainersLoseNothing).
func TestReaderOutlivesAbsorbedSegment(t *testing.T) {
	tbl, _ := maintainTable(t, 4)
	if _, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 2}); err != nil {
		t.Fatal(err)
	}
	before := namedArchives(tbl)
	reader, err := snapshot.Open(t.Context(), tbl.Catalog(), tbl.Identifier(), snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	commitRanges(t, tbl, 4, 8)
	if _, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 2}); err != nil {
		t.Fatal(err)
	}
	for _, p := range before {
		if slices.Contains(namedArchives(tbl), p) {
			t.Fatalf("segment %s is still named after the second expiry (%v): the test needs it absorbed", p, namedArchives(tbl))
		}
	}
	var n int
	for c, err := range reader.Commits(t.Context(), 0) {
		if err != nil {
			t.Fatalf("the reader's ledger walk after its segment was absorbed: %v", err)
		}
		if want := int64(10 * n); c.Ranges[0].Low != want {
			t.Fatalf("commit %d covers %v, want from %d (each once, in order)", n, c.Ranges[0].Interval, want)
		}
		n++
	}
	if n != 4 { // the ledger as of the head the reader loaded
		t.Fatalf("the reader read %d commits, want 4", n)
	}
}

// TestLookupsOutliveAbsorbedSegment: as TestReaderOutlivesAbsorbedSegment,
// for the readers that answer from block summaries and read a block only
// where they must: Locate (floe where), FirstCovering (floe as-of) and
// Summary (floe status, a sink's resume; it reads a block that a branch
// shares, whose part of main is not whole). They failed on "no such file"
// where Commits reloads the table (found by review); they reload too, and
// answer as of the head they then load.
func TestLookupsOutliveAbsorbedSegment(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("block shared with a branch=%v", shared), func(t *testing.T) {
			tbl, _ := maintainTable(t, 4)
			if shared {
				if err := tbl.CreateEmptyBranch(t.Context(), "br"); err != nil {
					t.Fatal(err)
				}
				br, err := snapshot.Open(t.Context(), tbl.Catalog(), tbl.Identifier(), snapshot.OpenOptions{Branch: "br"})
				if err != nil {
					t.Fatal(err)
				}
				for i := range 3 {
					r := mapping.Range{TopicPartition: mapping.TopicPartition{Topic: "b"}, Interval: mapping.Interval{Low: int64(10 * i), High: int64(10*i + 10)}}
					if _, err := br.Commit(t.Context(), snapshot.Flush{Ranges: []mapping.Range{r}}, snapshot.CommitOptions{Writer: "test"}); err != nil {
						t.Fatal(err)
					}
				}
				if err := tbl.Refresh(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			commitRanges(t, tbl, 4, 6)
			if _, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1}); err != nil {
				t.Fatal(err)
			}
			before := namedArchives(tbl)
			// One handle per reader: each meets the absorbed segment.
			var readers [3]*snapshot.Table
			for i := range readers {
				r, err := snapshot.Open(t.Context(), tbl.Catalog(), tbl.Identifier(), snapshot.OpenOptions{})
				if err != nil {
					t.Fatal(err)
				}
				readers[i] = r
			}
			commitRanges(t, tbl, 6, 12)
			if _, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1}); err != nil {
				t.Fatal(err)
			}
			for _, p := range before {
				if slices.Contains(namedArchives(tbl), p) {
					t.Fatalf("segment %s is still named: the test needs it absorbed", p)
				}
			}
			tp := mapping.TopicPartition{Topic: "t"}
			// Summary reads no block of main alone: it answers as of the
			// head it loaded; it reloads for a shared block.
			want := int64(60)
			if shared {
				want = 120
			}
			if sum, err := readers[0].Summary(t.Context(), 0); err != nil {
				t.Errorf("Summary: %v", err)
			} else if got := sum.Next()[tp]; got != want {
				t.Errorf("Summary: next offset %d, want %d", got, want)
			}
			if loc, err := readers[1].Locate(t.Context(), 0, tp, 15); err != nil {
				t.Errorf("Locate: %v", err)
			} else if loc.Status != mapping.StatusCovered || loc.Range.Low != 10 {
				t.Errorf("Locate: %+v, want offset 15 in range [10, 20)", loc)
			}
			if c, err := readers[2].FirstCovering(t.Context(), 0, mapping.Cut{tp: 15}); err != nil {
				t.Errorf("FirstCovering: %v", err)
			} else if len(c.Ranges) != 1 || c.Ranges[0].Low != 10 {
				t.Errorf("FirstCovering: %+v, want the commit of [10, 20)", c)
			}
		})
	}
}

// TestConcurrentMaintainersLoseNothing: two maintainers expire snapshots
// of one table at the same time, each through its own table handle, as
// two sinks or a sink and floe maintain do, while a writer commits. Every
// entry must stay readable all along: after each run, a reader that opens
// the table afresh reads the whole ledger, never a truncated one, and at
// the end the ledger holds every commit. (With one archive file per
// table, the later of two overlapping commits replaced the other's
// archive, and readers found the ledger truncated until a repair.)
func TestConcurrentMaintainersLoseNothing(t *testing.T) {
	writer, _ := maintainTable(t, 4)
	const commits = 60
	quiet := slog.New(slog.DiscardHandler)
	open := func() *snapshot.Table {
		tbl, err := snapshot.Open(t.Context(), writer.Catalog(), writer.Identifier(), snapshot.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tbl
	}
	maintainers := []*snapshot.Table{open(), open()}
	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i, m := range maintainers {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-done:
					return
				default:
				}
				if _, err := m.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1 + (n+i)%3, Logger: quiet}); err != nil {
					errs <- fmt.Errorf("maintainer %d, run %d: %w", i, n, err)
					return
				}
				r, err := snapshot.Open(t.Context(), writer.Catalog(), writer.Identifier(), snapshot.OpenOptions{})
				if err != nil {
					errs <- fmt.Errorf("reader after maintainer %d, run %d: %w", i, n, err)
					return
				}
				if _, err := r.Ledger(); err != nil {
					errs <- fmt.Errorf("reader after maintainer %d, run %d: %w", i, n, err)
					return
				}
			}
		})
	}
	for i := 4; i < 4+commits; i++ {
		r := mapping.Range{TopicPartition: mapping.TopicPartition{Topic: "t", Partition: 0}, Interval: mapping.Interval{Low: int64(10 * i), High: int64(10*i + 10)}}
		if _, err := writer.Commit(t.Context(), snapshot.Flush{Ranges: []mapping.Range{r}}, snapshot.CommitOptions{Writer: "test", Logger: quiet}); err != nil {
			close(done)
			wg.Wait()
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	l := freshLedger(t, writer)
	if len(l.Commits) != 4+commits {
		t.Fatalf("ledger has %d commits, want %d", len(l.Commits), 4+commits)
	}
	if next := l.Next()[mapping.TopicPartition{Topic: "t", Partition: 0}]; next != 10*(4+commits) {
		t.Fatalf("next offset %d, want %d", next, 10*(4+commits))
	}
	fresh := freshTable(t, writer)
	if live := len(fresh.Iceberg().Metadata().Snapshots()); live+len(archived(t, fresh)) < 4+commits {
		t.Fatalf("%d live and %d archived snapshots, want %d commits accounted for", live, len(archived(t, fresh)), 4+commits)
	}
}

// TestLegacyArchiveReadAndAbsorbed: a table whose whole archive is one
// file named by floe.ledger-archive, as floe before segments left it,
// reads its whole ledger; the next expiry's segment absorbs that file and
// the property goes.
func TestLegacyArchiveReadAndAbsorbed(t *testing.T) {
	tbl, _ := maintainTable(t, 6)
	if _, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1}); err != nil {
		t.Fatal(err)
	}
	want := ledger(t, freshTable(t, tbl))
	nameOnly(t, tbl, namedArchives(tbl)[0])
	if got := ledger(t, freshTable(t, tbl)); !reflect.DeepEqual(got, want) {
		t.Fatalf("ledger with the legacy archive\n%+v\nwant\n%+v", got, want)
	}
	commitRanges(t, tbl, 6, 9)
	res, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, legacy := tbl.Iceberg().Properties()[snapshot.PropLedgerArchive]; legacy || len(res.Segments) != 1 || res.Archived != 8 {
		t.Fatalf("after the next expiry: %+v, archive files %v; want the legacy archive absorbed into one segment of 8", res, namedArchives(tbl))
	}
	if l := ledger(t, freshTable(t, tbl)); len(l.Commits) != 9 || !reflect.DeepEqual(l.Commits[:6], want.Commits) {
		t.Fatalf("ledger after absorbing the legacy archive: %+v", l.Commits)
	}
}

// afterLoad is a catalog that, once armed, runs hook right after the
// next table load returns: another writer's work lands between a
// maintainer's reload and what it does with the table it loaded, as a
// race would. Every load and commit reaches the real catalog.
type afterLoad struct {
	icecat.Catalog
	armed *atomic.Bool
	hook  func()
}

func (c afterLoad) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	tbl, err := loadThrough(ctx, c.Catalog, c, ident)
	if err == nil && c.armed.CompareAndSwap(true, false) {
		c.hook()
	}
	return tbl, err
}

// TestExpiryOutlivesAbsorbedSegment: another handle's expiry absorbs and
// deletes a segment right after a maintainer reloaded the table, so the
// maintainer's expiry plans to merge a segment that is gone: a lost race.
// It reloads and plans again instead of failing ("no such file"; floe
// maintain exited 2 so in the fault campaign, beside its members'
// in-sink expiries).
func TestExpiryOutlivesAbsorbedSegment(t *testing.T) {
	tbl, _ := maintainTable(t, 4)
	if _, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 2}); err != nil {
		t.Fatal(err)
	}
	before := namedArchives(tbl)
	commitRanges(t, tbl, 4, 8)
	armed := &atomic.Bool{}
	cat := afterLoad{Catalog: tbl.Catalog(), armed: armed, hook: func() {
		if _, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 2}); err != nil {
			t.Errorf("the other writer's expiry: %v", err)
		}
	}}
	stale, err := snapshot.Open(t.Context(), cat, tbl.Identifier(), snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	if _, err := stale.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 2}); err != nil {
		t.Fatalf("expiry after another writer absorbed a segment it merges: %v", err)
	}
	for _, p := range before {
		if slices.Contains(namedArchives(tbl), p) {
			t.Fatalf("segment %s is still named after the other expiry (%v): the test needs it absorbed", p, namedArchives(tbl))
		}
	}
	if got := len(ledger(t, stale).Commits); got != 8 {
		t.Fatalf("the ledger holds %d commits after both expiries, want 8", got)
	}
}
