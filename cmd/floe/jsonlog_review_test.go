package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
)

// TestJSONLogErrorFromEnvOrConfig (from a review): 2d40f55 makes the
// line saying why a command failed a JSON record "with --log-format json"
// (docs/deployment.md, docs/exit-codes.md). A log shipper's deployment
// sets it as FLOE_LOG_FORMAT=json or log-format: json in --config, as
// every flag may be. When the config file itself is refused (a misspelt
// key, or one of this diff's new refusals: an '&' anchor, an empty value)
// applyConfig stops before applying any variable or key, so log-format is
// still text and the one ERROR line is the plain "floe: ..." text line
// among JSON records; likewise when a flag before --log-format on the
// command line is unknown.
func TestJSONLogErrorFromEnvOrConfig(t *testing.T) {
	defer slog.SetDefault(slog.Default())
	t.Chdir(t.TempDir())
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("catalog: /x\nkafka-sasl-password: &Secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		env  string
		args []string
	}{
		"FLOE_LOG_FORMAT=json, config refused":    {"json", []string{"status", "--config", bad, "--table", "lake.t"}},
		"--log-format json after a misspelt flag": {"", []string{"audit", "--tabel", "x", "--log-format", "json"}},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("FLOE_LOG_FORMAT", tc.env)
			}
			var stdout, stderr bytes.Buffer
			code := run(tc.args, &stdout, &stderr)
			var rec struct {
				Level    string `json:"level"`
				ExitCode int    `json:"exit_code"`
			}
			if err := json.Unmarshal(bytes.TrimSpace(stderr.Bytes()), &rec); err != nil || rec.Level != "ERROR" {
				t.Errorf("exit %d, stderr %q: want a JSON record (level ERROR, exit_code)", code, stderr.String())
			}
		})
	}
}
