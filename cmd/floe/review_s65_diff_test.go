package main

import (
	"slices"
	"strings"
	"testing"
)

// TestReviewS65DiffCatalogPropSecretWarns: --catalog-prop passes any
// iceberg-go catalog property, secrets among them (a REST catalog's token
// or credential, S3, Glue or ADLS keys, an Authorization header), and
// those are in the process list (ps) like --catalog-token's: they warn
// as the flags that take the same secrets do, naming no value; a property
// that is no secret does not.
func TestReviewS65DiffCatalogPropSecretWarns(t *testing.T) {
	const secret = "prop-Secret-7e7e"
	_, catFlags := localCatalog(t)
	status := append([]string{"status"}, catFlags...)
	for _, prop := range []string{"token=" + secret, "credential=id:" + secret, "s3.secret-access-key=" + secret,
		"glue.secret-access-key=" + secret, "header.Authorization=Bearer " + secret} {
		args := append(slices.Clone(status), "--catalog-prop", prop)
		_, out, errs := floe(t, args...)
		if n := strings.Count(errs, "in the process list (ps)"); n != 1 || strings.Contains(out+errs, secret) {
			t.Errorf("floe %s: %d warnings, want 1 without the secret; got:\n%s", strings.Join(args, " "), n, errs)
		}
	}
	args := append(slices.Clone(status), "--catalog-prop", "s3.region=eu-west-1")
	if _, _, errs := floe(t, args...); strings.Contains(errs, "in the process list (ps)") {
		t.Errorf("floe %s warns of a secret where it gives none:\n%s", strings.Join(args, " "), errs)
	}
}
