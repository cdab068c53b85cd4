package main

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/localstack"
)

// secretFlag is a flag whose value is, or may hold, a secret, which any
// user of the host reads in the process list (ps) when it is given on the
// command line.
type secretFlag struct {
	name string
	// instead says where else to give the secret, beside the flag's
	// FLOE_ variable and its key in the --config file, where there is
	// more (the AWS credential chain); empty for nothing more.
	instead string
	// uri: the value is a URI, which holds a secret only with a password
	// in it (postgres://USER:PASSWORD@HOST/DB).
	uri bool
	// public is a value that is no secret, empty for none.
	public string
}

// secretFlags are every command's flags that take a secret. The flag help
// and the docs said to prefer a variable; the warning tells the user who
// did not read them.
var secretFlags = []secretFlag{
	{name: flagPassword},
	{name: flagToken},
	{name: "schema-registry-password"},
	{name: "schema-registry-token"},
	// https://KEY:SECRET@HOST, Confluent's basic.auth.credentials.source=URL.
	{name: "schema-registry", uri: true, instead: "or the password alone as FLOE_SCHEMA_REGISTRY_PASSWORD"},
	// The local stack's key is in floe's source, and the commands its
	// banner prints give it as a flag: they must not warn.
	{name: "s3-secret-access-key", public: localstack.SecretAccessKey,
		instead: "or leave the --s3-* key flags out for the AWS credential chain (AWS_SECRET_ACCESS_KEY, a profile in ~/.aws/credentials)"},
	{name: "s3-session-token",
		instead: "or leave the --s3-* key flags out for the AWS credential chain (AWS_SESSION_TOKEN, a profile in ~/.aws/credentials)"},
	{name: "catalog", uri: true},
	{name: "catalog-token"},
	{name: "catalog-credential"},
}

// secretsOnCommandLine warns of each secret given as a flag on the command
// line, naming the variable, the config file's key and any other place to
// give it instead, and never the value. Call it before applyConfig, which
// marks the flags that variables and the config file set as changed too.
func secretsOnCommandLine(fs *pflag.FlagSet) []string {
	var warnings []string
	for _, s := range secretFlags {
		f := fs.Lookup(s.name)
		if f == nil || !f.Changed {
			continue
		}
		v := f.Value.String()
		// A URI with a password is one catalog.Redact changes.
		if v == "" || v == s.public || (s.uri && catalog.Redact(v) == v) {
			continue
		}
		what := "--" + s.name + " on the command line is"
		if s.uri {
			what = "--" + s.name + " on the command line holds a password, which is"
		}
		instead := ""
		if s.instead != "" {
			instead = ", " + s.instead
		}
		warnings = append(warnings, fmt.Sprintf("%s in the process list (ps) for any user of this host: set %s, or %s: in the --config file%s, instead",
			what, envName(s.name), s.name, instead))
	}
	// --catalog-prop passes any iceberg-go catalog property, the secrets
	// the flags above take among them: named by their key, never the value.
	if f := fs.Lookup("catalog-prop"); f != nil && f.Changed {
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			for _, kv := range sv.GetSlice() {
				key, _, _ := strings.Cut(kv, "=")
				if secretProp(key) {
					warnings = append(warnings, fmt.Sprintf("--catalog-prop %s=... on the command line is in the process list (ps) for any user of this host: set %s, or catalog-prop: in the --config file, instead",
						key, envName("catalog-prop")))
				}
			}
		}
	}
	return warnings
}

// secretProp reports whether an iceberg-go catalog property of key holds
// a secret: a REST catalog's token or client credential, an S3, Glue,
// GCS or ADLS key or token, a password, an Authorization header.
func secretProp(key string) bool {
	k := strings.ToLower(strings.TrimSpace(key))
	switch {
	case k == "token", k == "credential", k == "header.authorization":
		return true
	case strings.HasPrefix(k, "adls.sas-token"), strings.HasPrefix(k, "adls.auth.shared-key.account.key"):
		return true
	}
	for _, suffix := range []string{"secret-access-key", "session-token", ".token", "password", "secret"} {
		if strings.HasSuffix(k, suffix) {
			return true
		}
	}
	return false
}
