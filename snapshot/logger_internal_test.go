package snapshot

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"

	"github.com/floe-dev/floe/catalog"
)

// captureDefault replaces slog's default logger for the test and returns
// what it receives.
func captureDefault(t *testing.T) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(prev) })
	return &buf
}

// pathOnlyFile is a data file that only has a path.
type pathOnlyFile struct {
	iceberg.DataFile
	path string
}

func (f pathOnlyFile) FilePath() string { return f.path }

// A failure to remove an uncommitted file goes to the commit's logger, not
// to slog's default.
func TestRemoveFilesLogsToGivenLogger(t *testing.T) {
	dir := t.TempDir()
	cat, err := catalog.Open(t.Context(), catalog.Config{Catalog: filepath.Join(dir, "catalog.db"), Warehouse: filepath.Join(dir, "wh")})
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := Open(t.Context(), cat, []string{"lake", "t"}, OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	// A non-empty folder cannot be removed like a file, even by root.
	stuck := filepath.Join(dir, "stuck.parquet")
	if err := os.MkdirAll(filepath.Join(stuck, "inside"), 0o755); err != nil {
		t.Fatal(err)
	}
	def := captureDefault(t)
	var got bytes.Buffer
	log := slog.New(slog.NewTextHandler(&got, nil))

	tbl.removeFiles(t.Context(), log, []iceberg.DataFile{pathOnlyFile{path: stuck}})
	if !strings.Contains(got.String(), "cannot remove uncommitted data file") {
		t.Errorf("given logger got %q, want the removal failure", got.String())
	}
	if def.Len() != 0 {
		t.Errorf("slog's default logger got %q, want nothing", def.String())
	}

	// nil means slog.Default().
	tbl.removeFiles(t.Context(), nil, []iceberg.DataFile{pathOnlyFile{path: stuck}})
	if !strings.Contains(def.String(), "cannot remove uncommitted data file") {
		t.Errorf("nil logger: slog's default got %q, want the removal failure", def.String())
	}
}
