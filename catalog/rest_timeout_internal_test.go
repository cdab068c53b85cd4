package catalog

import (
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog/glue"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// TestRESTOpenServerNeverAnswers: a --catalog URL whose server takes the
// connection and never answers (a Kafka broker's port) fails within the
// open timeout, as an unreachable catalog, naming the URL and --catalog;
// it held every command forever (a new user's run).
func TestRESTOpenServerNeverAnswers(t *testing.T) {
	spec := silentServer(t)
	start := time.Now()
	_, err := loadREST(t.Context(), "rest", spec, iceberg.Properties{"uri": spec, "type": "rest"}, 300*time.Millisecond)
	ce, ok := errors.AsType[*CheckError](err)
	if !errors.Is(err, ErrCatalogUnreachable) || !strings.Contains(err.Error(), spec) || !ok || !slices.Contains(ce.Settings, SettingCatalog) {
		t.Fatalf("err = %v, want the catalog unreachable, naming %s and --catalog", err, spec)
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Fatalf("gave up after %s", waited)
	}
}

// TestGlueEndpointNeverAnswers: a Glue endpoint that takes the connection
// and never answers fails each request after the request timeout (the SDK
// tries three times), as an unreachable catalog naming the endpoint and
// where it was set; it held every command forever (a new user's run).
func TestGlueEndpointNeverAnswers(t *testing.T) {
	endpoint := silentServer(t)
	st := &s3Storage{cfg: aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("k", "s", "")}}
	props := iceberg.Properties{glue.Endpoint: endpoint}
	cat, err := openGlueTimeout(st, props, nil, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	g := &guardedCatalog{Catalog: cat, spec: string(Glue), props: props, st: st}
	start := time.Now()
	_, err = g.LoadTable(t.Context(), []string{"lake", "orders"})
	if !errors.Is(err, ErrCatalogUnreachable) || !strings.Contains(err.Error(), endpoint+" (set by --catalog-prop glue.endpoint)") {
		t.Fatalf("err = %v, want the catalog unreachable, naming %s and where it was set", err, endpoint)
	}
	if waited := time.Since(start); waited > 20*time.Second {
		t.Fatalf("gave up after %s", waited)
	}
}

// silentServer returns the URL of a server that takes connections and
// never answers, as a Kafka broker's port does an HTTP request.
func silentServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	return "http://" + ln.Addr().String()
}
