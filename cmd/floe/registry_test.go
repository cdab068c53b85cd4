package main

import (
	"strings"
	"testing"
)

// floe sink checks the schema registry flags before it reaches anything:
// the broker given here does not exist. The password is read from
// FLOE_SCHEMA_REGISTRY_PASSWORD, where the flag's help recommends it.
func TestSinkChecksRegistryFlags(t *testing.T) {
	base := []string{"sink", "--brokers", "127.0.0.1:1", "--topic", "t", "--table", "lake.t"}
	for _, c := range []struct {
		name string
		args []string
		env  string
		want string
	}{
		{"no scheme", []string{"--schema-registry", "registry:8081"}, "", "want http://HOST:PORT"},
		{"password from the environment, no user", []string{"--schema-registry", "http://registry:8081"}, "s3cret", "without --schema-registry-user"},
		{"CA for http", []string{"--schema-registry", "http://registry:8081", "--schema-registry-ca", "ca.pem"}, "", "https only"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.env != "" {
				t.Setenv("FLOE_SCHEMA_REGISTRY_PASSWORD", c.env)
			}
			code, _, errs := floe(t, append(base, c.args...)...)
			if code != 2 || !strings.Contains(errs, c.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, errs, c.want)
			}
		})
	}
}
