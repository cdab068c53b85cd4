package catalog_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/floe-dev/floe/catalog"
)

// TestFolderWarehouseRunsNoCredentialProcess: a SQLite catalog
// whose warehouse is a folder, its tables all local, opened by a user
// whose shell sets AWS_PROFILE to a profile with a credential_process (as
// aws-vault, granted or a password manager's CLI set it up, often with an
// MFA or biometric prompt). Since afc8d04 every Open resolves the AWS
// environment and retrieves credentials, so every floe command on the
// local lake runs the process (and waits for it).
//
// From a review of this change; fixed since.
func TestFolderWarehouseRunsNoCredentialProcess(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	script := filepath.Join(dir, "creds.sh")
	if err := os.WriteFile(script, []byte(fmt.Sprintf("#!/bin/sh\necho x >> %s\nsleep 2\necho '{\"Version\":1,\"AccessKeyId\":\"AKID\",\"SecretAccessKey\":\"SECRET\"}'\n", marker)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config"), []byte("[profile dev]\nregion = us-east-1\ncredential_process = "+script+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_WEB_IDENTITY_TOKEN_FILE"} {
		t.Setenv(v, "")
	}
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_PROFILE", "dev")
	start := time.Now()
	cat, err := catalog.Open(t.Context(), catalog.Config{Catalog: filepath.Join(dir, "catalog.db"), Warehouse: filepath.Join(dir, "warehouse")})
	if err != nil {
		t.Fatal(err)
	}
	_ = cat
	took := time.Since(start)
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("opening a SQLite catalog with a folder warehouse ran AWS_PROFILE's credential_process (took %s): a local lake now waits on (and prompts through) the AWS credential chain on every command", took.Round(time.Millisecond))
	}
}
