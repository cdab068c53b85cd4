package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestRESTCatalogNotACatalog (from a new-user run): --catalog naming an
// HTTP server that is not an Iceberg REST catalog (the schema registry's
// port, the S3 endpoint's, a catalog URL without its path prefix) failed
// with "REST error: failed to decode error response: json: cannot
// unmarshal number into Go value of type struct { Error
// *rest.errorResponse ... }", naming neither the cause nor the flag. It
// says the server does not answer as a REST catalog and to check
// --catalog.
func TestRESTCatalogNotACatalog(t *testing.T) {
	for _, c := range []struct {
		name, ctype string
		status      int
		body        string
	}{
		{"registry", "text/plain; charset=utf-8", http.StatusNotFound, "404 page not found\n"},
		{"s3", "application/xml", http.StatusForbidden, `<?xml version="1.0"?><Error><Code>AccessDenied</Code></Error>`},
		{"html", "text/html", http.StatusOK, `<html><body>welcome</body></html>`},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", c.ctype)
			w.WriteHeader(c.status)
			w.Write([]byte(c.body))
		}))
		code, out, errs := floe(t, "status", "--catalog", srv.URL)
		srv.Close()
		if code != exitError || !strings.Contains(errs, "does not answer as an Iceberg REST catalog") || !strings.Contains(errs, "check --catalog") {
			t.Errorf("%s: exit %d\n%s\n%s", c.name, code, out, errs)
		}
	}
}
