package connector

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestTokenEndpointHangs (from a review): franz-go calls the OAUTHBEARER
// mechanism with its client's context and no deadline. A token endpoint
// that takes the request and never answers held the authentication for
// ever: the mechanism dropped the context it is given, and the token
// source's HTTP client had no timeout. The fetch ends with the context.
func TestTokenEndpointHangs(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	sec := Security{Mechanism: MechanismOAuthBearer, TokenURL: srv.URL, User: "floe-client", Password: "client-Secret-9f9f"}
	m, err := sec.mechanism(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, _, err := m.Authenticate(ctx, "127.0.0.1:9092")
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "get an OAUTHBEARER token from") {
			t.Fatalf("authentication against a hung endpoint: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("OAUTHBEARER authentication still waits for the token endpoint 10 s after its 1 s context ended")
	}
}
