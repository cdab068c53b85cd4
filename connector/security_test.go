package connector

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestOAuthBearerTokenEndpoint gets OAUTHBEARER tokens from a
// client-credentials token endpoint (an httptest server): the client
// authenticates with its id and secret, asks for the scope, sends the
// token in its first SASL message, and fetches no second token while the
// first is valid. A refused client is an error naming the endpoint and
// the settings, without the secret. (kfake serves no OAUTHBEARER, so the
// broker's side is not tested.)
func TestOAuthBearerTokenEndpoint(t *testing.T) {
	const secret = "client-Secret-3c3c"
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		id, pass, ok := r.BasicAuth()
		if err := r.ParseForm(); err != nil || r.Form.Get("grant_type") != "client_credentials" {
			t.Errorf("token request: grant_type %q (%v)", r.Form.Get("grant_type"), err)
		}
		w.Header().Set("Content-Type", "application/json")
		if !ok || id != "floe-client" || pass != secret || r.Form.Get("scope") != "kafka" {
			w.WriteHeader(http.StatusUnauthorized)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_client", "error_description": "client " + id + " " + pass})
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "token-from-endpoint", "token_type": "bearer", "expires_in": 3600})
	}))
	defer srv.Close()

	sec := Security{Mechanism: MechanismOAuthBearer, TokenURL: srv.URL, User: "floe-client", Password: secret, Scope: "kafka"}
	m, err := sec.mechanism(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		_, first, err := m.Authenticate(t.Context(), "127.0.0.1:9092")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(first), "auth=Bearer token-from-endpoint") {
			t.Errorf("first SASL message %q lacks the endpoint's token", first)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d token requests for two authentications, want 1 (the token is valid for an hour)", n)
	}

	sec.Password = "wrong-" + secret
	m, err = sec.mechanism(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = m.Authenticate(t.Context(), "127.0.0.1:9092")
	var ce *CheckError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "get an OAUTHBEARER token from "+srv.URL+": the endpoint answered 401 Unauthorized (invalid_client)") ||
		strings.Contains(err.Error(), secret) || len(ce.Settings) != 3 || ce.Settings[0] != SettingTokenURL {
		t.Errorf("refused client: %v (settings %v)", err, ce)
	}
	if explained := sec.explainDial(err); explained != ce {
		t.Errorf("explainDial should keep the mechanism's own error, got %v", explained)
	}
}

// TestMSKIAMCredentialChain signs AWS_MSK_IAM's first message with the
// credentials of the AWS SDK's standard chain (here its environment
// variables): the access key id is in it, the secret key is not.
func TestMSKIAMCredentialChain(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAFLOETEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "aws-Secret-7d7d")
	t.Setenv("AWS_REGION", "eu-west-1")
	m, err := Security{Mechanism: MechanismMSKIAM}.mechanism(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	_, first, err := m.Authenticate(t.Context(), "b-1.floe.abc123.c2.kafka.eu-west-1.amazonaws.com:9098")
	if err != nil {
		t.Fatal(err)
	}
	var msg map[string]string
	if err := json.Unmarshal(first, &msg); err != nil {
		t.Fatalf("first message %q: %v", first, err)
	}
	if !strings.HasPrefix(msg["x-amz-credential"], "AKIAFLOETEST/") || msg["action"] != "kafka-cluster:Connect" || strings.Contains(string(first), "aws-Secret-7d7d") {
		t.Errorf("AWS_MSK_IAM first message: %s", first)
	}
}
