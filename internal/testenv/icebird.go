package testenv

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Icebird is a second Iceberg reader, outside Go: icebird (npm) run by
// Node, which applies v2 equality and position deletes (not deletion
// vectors). Its Node project is internal/icebird (package-lock.json pins
// it; npm ci there installs it and patches it for the raw-deflate Avro
// manifests iceberg-go writes). Tests read floe's tables back with it to
// show that a reader we did not write sees the same rows as iceberg-go's
// scan.
type Icebird struct {
	node, script string
}

// NewIcebird finds node and the installed internal/icebird project. When
// either is missing the test is skipped, or fails under
// FLOE_REQUIRE_SERVERS=1 (.ci/install-servers.sh runs npm ci there).
func NewIcebird(t testing.TB) *Icebird {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		unavailable(t, "node is not on PATH (Debian's nodejs, v20 or later)")
	}
	dir, err := findUp(filepath.Join("internal", "icebird", "package.json"))
	if err != nil {
		unavailable(t, "no internal/icebird: %v", err)
	}
	dir = filepath.Dir(dir)
	patched := filepath.Join(dir, "node_modules", "icebird", "src", "avro", "avro.read.js")
	if b, err := os.ReadFile(patched); err != nil || !bytes.Contains(b, []byte("floe: raw deflate")) {
		unavailable(t, "icebird is not installed (or not patched) in %s: run npm ci there", dir)
	}
	return &Icebird{node: node, script: filepath.Join(dir, "read.mjs")}
}

// Read reads the table whose current metadata file is metadataLocation (a
// file:// URL or a path on a file warehouse) and returns its live rows,
// deletes applied, one map per row keyed by column name. Numbers decode as
// json.Number; timestamps as ISO-8601 strings; a binary column as the text
// of its bytes (hyparquet reads a binary column without a logical type as
// text), other bytes as base64.
func (ib *Icebird) Read(ctx context.Context, metadataLocation string) ([]map[string]any, error) {
	path := strings.TrimPrefix(metadataLocation, "file://")
	cmd := exec.CommandContext(ctx, ib.node, ib.script, path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("icebird read of %s: %w: %s", path, err, strings.TrimSpace(stderr.String()))
	}
	var rows []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		d := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		d.UseNumber()
		var row map[string]any
		if err := d.Decode(&row); err != nil {
			return nil, fmt.Errorf("icebird read of %s: row %d: %w", path, len(rows), err)
		}
		rows = append(rows, row)
	}
	return rows, sc.Err()
}

// findUp walks up from the working directory to the first directory
// holding rel, and returns the path of rel there.
func findUp(rel string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New(rel + " not found above the working directory")
		}
		dir = parent
	}
}
