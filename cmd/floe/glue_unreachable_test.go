package main

import (
	"net"
	"strings"
	"testing"
)

// TestGlueUnreachableNamesEndpoint (from a new-user run): a Glue catalog
// whose endpoint (moto's, a Glue-compatible server) did not answer was
// reported as "catalog unreachable (is its server running at that
// address?): ... Post: dial tcp: connect: connection refused; check
// --catalog": the AWS SDK's error leaves the address out, and --catalog
// (glue) is not where the endpoint is set. The error names the endpoint
// and the setting it came from.
func TestGlueUnreachableNamesEndpoint(t *testing.T) {
	isolateAWS(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "floe")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "floe-secret")
	t.Setenv("AWS_REGION", "us-east-1")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()

	t.Setenv("AWS_ENDPOINT_URL_GLUE", closed)
	code, out, errs := floe(t, "status", "--catalog", "glue")
	if code != exitError || !strings.Contains(errs, "Glue endpoint "+closed+" (set by AWS_ENDPOINT_URL_GLUE)") {
		t.Errorf("Glue at a closed port from AWS_ENDPOINT_URL_GLUE: exit %d\n%s\n%s", code, out, errs)
	}
	t.Setenv("AWS_ENDPOINT_URL_GLUE", "")
	code, out, errs = floe(t, "status", "--catalog", "glue", "--catalog-prop", "glue.endpoint="+closed)
	if code != exitError || !strings.Contains(errs, "Glue endpoint "+closed+" (set by --catalog-prop glue.endpoint)") {
		t.Errorf("Glue at a closed port from --catalog-prop glue.endpoint: exit %d\n%s\n%s", code, out, errs)
	}
}
