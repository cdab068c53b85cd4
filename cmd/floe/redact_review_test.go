package main

import (
	"strings"
	"testing"
)

// TestCatalogURIPasswordParsedAsPortNotPrinted (from a review):
// 4a792a3 hides the password of a catalog URI that does not parse, and
// redact hides it when url.Parse finds a user. A password not
// percent-encoded whose first part is digits, up to a '/', '?' or '#'
// ("2024/Summer-...", "1234#..."), makes the URI parse, as a host "floe"
// with that port and no user at all: redact returns it unchanged, and the
// error prints the whole password. docs/deployment.md: "Errors and logs
// show URIs with the password replaced by xxxxx".
func TestCatalogURIPasswordParsedAsPortNotPrinted(t *testing.T) {
	const secret = "Pg-Secret-s49b"
	addr := refusedTCPAddr(t)
	for _, pass := range []string{"2024/" + secret, "1234#" + secret, "99?" + secret} {
		for _, uri := range []string{"postgres://floe:" + pass + "@" + addr + "/iceberg?sslmode=disable", "http://floe:" + pass + "@" + addr + "/catalog"} {
			code, out, errs := floe(t, "status", "--table", "lake.orders", "--catalog", uri)
			if strings.Contains(out+errs, secret) {
				t.Errorf("catalog %s: exit %d, the output holds the password:\n%s%s", strings.SplitN(uri, ":", 2)[0], code, out, errorLine(errs))
			}
		}
	}
}
