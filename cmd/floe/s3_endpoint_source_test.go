package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestS3UnreachableNamesEndpointSource: an S3 endpoint that cannot be
// reached is reported with where the endpoint came from. The hint named
// AWS_ENDPOINT_URL_S3 whatever set it, so a production user whose endpoint
// was the config file's s3-endpoint was sent to a variable they never set.
func TestS3UnreachableNamesEndpointSource(t *testing.T) {
	closed := "http://" + refusedTCPAddr(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "floe.yaml")
	if err := os.WriteFile(config, []byte("s3-endpoint: "+closed+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	profileConfig := filepath.Join(dir, "aws-config")
	if err := os.WriteFile(profileConfig, []byte("[profile lake]\nendpoint_url = "+closed+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		env, args []string
		want      string
	}{
		{"flag", nil, []string{"--s3-endpoint", closed}, "check --s3-endpoint"},
		{"config file", nil, []string{"--config", config}, "--s3-endpoint was set by config file " + config + " line 1"},
		{"FLOE_S3_ENDPOINT", []string{"FLOE_S3_ENDPOINT", closed}, nil, "--s3-endpoint was set by FLOE_S3_ENDPOINT"},
		{"AWS_ENDPOINT_URL_S3", []string{"AWS_ENDPOINT_URL_S3", closed}, nil, "The endpoint is from AWS_ENDPOINT_URL_S3"},
		{"AWS_ENDPOINT_URL", []string{"AWS_ENDPOINT_URL", closed}, nil, "The endpoint is from AWS_ENDPOINT_URL)"},
		// Deploy review s67: the profile's endpoint_url was said to be
		// ~/.aws/config's, where AWS_CONFIG_FILE named another file.
		{"profile endpoint_url", []string{"AWS_PROFILE", "lake"}, nil,
			"The endpoint is from endpoint_url of profile lake of the AWS shared config " + profileConfig + " (AWS_CONFIG_FILE))"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			isolateAWS(t)
			t.Setenv("AWS_ACCESS_KEY_ID", "floe")
			t.Setenv("AWS_SECRET_ACCESS_KEY", "floe-secret")
			if c.env != nil {
				t.Setenv(c.env[0], c.env[1])
			}
			if c.name == "profile endpoint_url" {
				t.Setenv("AWS_CONFIG_FILE", profileConfig)
			}
			args := append([]string{"status", "--catalog", filepath.Join(t.TempDir(), "catalog.db"), "--warehouse", "s3://lake/warehouse"}, c.args...)
			code, _, errs := floe(t, args...)
			line := errorLine(errs)
			if code != exitError || !strings.Contains(line, "object store unreachable") || !strings.Contains(line, c.want) {
				t.Fatalf("exit %d, error line:\n%s\nwant exit %d, object store unreachable and %q", code, line, exitError, c.want)
			}
			if named := strings.Contains(line, "AWS_ENDPOINT_URL_S3"); named != (c.name == "AWS_ENDPOINT_URL_S3") {
				t.Errorf("AWS_ENDPOINT_URL_S3 named: %v, want only where it set the endpoint:\n%s", named, line)
			}
		})
	}
}

// TestS3RefusedCredentialsNameTheirSource: keys the S3 server refuses are
// named by where they came from: a profile's keys in the shared
// credentials file, the AWS_* variables, or floe's own settings. Keys of
// a profile were refused with "check AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY",
// which were not set (seen by a deployment walk-through).
func TestS3RefusedCredentialsNameTheirSource(t *testing.T) {
	e := newS3Env(t)
	const badSecret = "not-the-secret-0123456789"
	creds := filepath.Join(t.TempDir(), "credentials")
	if err := os.WriteFile(creds, []byte("[lake]\naws_access_key_id = "+e.s3.AccessKey+"\naws_secret_access_key = "+badSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		env, args []string
		want      string
	}{
		{"profile", []string{"AWS_PROFILE", "lake", "AWS_SHARED_CREDENTIALS_FILE", creds, "AWS_ACCESS_KEY_ID", "", "AWS_SECRET_ACCESS_KEY", ""}, nil,
			"check the keys of profile lake in " + creds + " and"},
		{"variables", []string{"AWS_SECRET_ACCESS_KEY", badSecret}, nil, "check AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY and"},
		{"flags", nil, []string{"--s3-access-key-id", e.s3.AccessKey, "--s3-secret-access-key", badSecret},
			"check the S3 access key id and secret access key floe was given and"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for i := 0; i < len(c.env); i += 2 {
				t.Setenv(c.env[i], c.env[i+1])
			}
			args := append([]string{"status", "--catalog", filepath.Join(t.TempDir(), "catalog.db"), "--warehouse", e.warehouse()}, c.args...)
			code, _, errs := floe(t, args...)
			if line := errorLine(errs); code != exitError || !strings.Contains(line, "object store rejected the credentials") || !strings.Contains(line, c.want) || strings.Contains(line, badSecret) {
				t.Errorf("exit %d, error line:\n%s\nwant exit %d and %q", code, line, exitError, c.want)
			}
		})
	}
}
