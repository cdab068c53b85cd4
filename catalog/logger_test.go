package catalog_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/mapping"
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

// What opening a catalog on S3 and creating a table in it log goes to
// Config.Logger, not to slog's default: the S3 configuration, a
// warehouse listing S3 denies, and a table location S3 cannot list.
func TestCatalogLogsToGivenLogger(t *testing.T) {
	var lists int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("list-type") == "2" {
			lists++
		}
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`))
	}))
	defer srv.Close()
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))

	def := captureDefault(t)
	var got bytes.Buffer
	log := slog.New(slog.NewTextHandler(&got, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cat, err := catalog.Open(t.Context(), catalog.Config{
		Catalog:   filepath.Join(t.TempDir(), "catalog.db"),
		Warehouse: "s3://bucket/wh",
		S3:        catalog.S3Config{Endpoint: srv.URL, Region: "us-east-1", AccessKeyID: "k", SecretAccessKey: "s"},
		Logger:    log,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.CreateNamespace(t.Context(), []string{"lake"}, nil); err != nil {
		t.Fatal(err)
	}
	// Creating the table fails (S3 denies the write), after its location
	// could not be listed.
	_, _ = cat.CreateTable(t.Context(), []string{"lake", "t"}, mapping.Schema())
	if lists < 2 {
		t.Fatalf("%d listings, want the warehouse's and the table location's", lists)
	}
	for _, want := range []string{"S3 storage configured", "S3 denied listing the warehouse", "cannot list a new table's location"} {
		if !strings.Contains(got.String(), want) {
			t.Errorf("given logger lacks %q; got:\n%s", want, got.String())
		}
	}
	if def.Len() != 0 {
		t.Errorf("slog's default logger got %q, want nothing", def.String())
	}
}
