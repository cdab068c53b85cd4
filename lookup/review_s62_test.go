package lookup_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/lookup"
)

// TestReviewS62FilesCheckMissesDeleteFile (review s62): floe files --check
// "looks for every file in the storage" and fails naming those it no
// longer has. On an upsert table the snapshot's files are its data files
// and its equality-delete files (FilesResult.DeleteFiles, which floe files
// lists after the data files). An equality-delete file deleted behind
// floe's back (an aws s3 rm, a lifecycle rule) makes the key's superseded
// row live again for a reader of the listed files, and makes a scan fail;
// Check looked only at the data files, so --check said nothing was
// missing (exit 0).
func TestReviewS62FilesCheckMissesDeleteFile(t *testing.T) {
	e := floetest.New(t)
	const topic = "accounts"
	e.Topic(topic, 1, nil)
	tbl, dlq := e.UpsertTable("lake.accounts")
	at := time.Unix(1_700_000_000, 0)
	for i, v := range []string{"one", "uno"} {
		e.Produce([]*kgo.Record{{Topic: topic, Key: []byte("k1"), Value: []byte(v), Timestamp: at.Add(time.Duration(i) * time.Second)}})
		if _, err := e.Sink(e.Broker(), tbl, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := lookup.Files(e.Ctx, tbl, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.DeleteFiles) == 0 {
		t.Fatalf("the update wrote no delete file: %+v", res)
	}
	gone := res.DeleteFiles[len(res.DeleteFiles)-1].Path
	if err := os.Remove(strings.TrimPrefix(gone, "file://")); err != nil {
		t.Fatal(err)
	}
	missing, err := res.Check(e.Ctx, tbl)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range missing {
		if m == gone {
			return
		}
	}
	t.Errorf("floe files --check found %v missing; delete file %s is gone from the storage and was not named (the snapshot cannot be read, and its data files alone give the key's superseded row)", missing, gone)
}
