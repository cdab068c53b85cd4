package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/catalog"
)

// restFixture is an Iceberg REST catalog endpoint for tests: the HTTP
// surface floe uses (OAuth2 client-credentials tokens, config with a
// warehouse, namespaces, create, load and commit of tables) in front of
// iceberg-go's SQL catalog. No real REST catalog server can be built or
// installed here (they are Java, Rust or Python, or Go modules the proxy
// does not serve), so this fixture tests floe's REST configuration through
// iceberg-go's real REST client; the server side is ours and minimal.
type restFixture struct {
	t        *testing.T
	srv      *httptest.Server
	backend  icecat.Catalog
	clientID string
	secret   string
	token    string // static token also accepted

	mu         sync.Mutex
	issued     []string // tokens issued by the OAuth2 endpoint
	warehouses []string // warehouse asked for in GET /v1/config
	unauthed   int      // requests refused for lack of a valid token
	commits    int
	conflicts  int

	// Faults for the fault campaign, which a real catalog cannot be made
	// to produce on cue: while lose is positive, a commit is applied and
	// its response lost (the connection closes unanswered); delay holds
	// each commit that long before it is applied.
	lose  atomic.Int32
	delay atomic.Int64 // a time.Duration

	// tableConfig is the config a table's load and creation answer with:
	// the FileIO properties (s3.*) a server vends its clients.
	tableConfig map[string]string
}

// newRESTFixture serves a catalog whose tables are in a local folder.
func newRESTFixture(t *testing.T) *restFixture {
	t.Helper()
	dir := t.TempDir()
	return newRESTFixtureOn(t, catalog.Config{Catalog: filepath.Join(dir, "rest-backend.db"), Warehouse: filepath.Join(dir, "warehouse")})
}

// newRESTFixtureOn serves the SQL catalog backend opens.
func newRESTFixtureOn(t *testing.T, backendCfg catalog.Config) *restFixture {
	t.Helper()
	backend, err := catalog.Open(t.Context(), backendCfg)
	if err != nil {
		t.Fatal(err)
	}
	f := &restFixture{t: t, backend: backend, clientID: "floe-client", secret: "s3cr3t-client-secret", token: "static-token-1",
		tableConfig: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/oauth/tokens", f.oauth)
	mux.HandleFunc("GET /v1/config", f.auth(f.config))
	mux.HandleFunc("POST /v1/{prefix}/namespaces", f.auth(f.createNamespace))
	mux.HandleFunc("GET /v1/{prefix}/namespaces", f.auth(f.listNamespaces))
	mux.HandleFunc("GET /v1/{prefix}/namespaces/{ns}/tables", f.auth(f.listTables))
	mux.HandleFunc("GET /v1/{prefix}/namespaces/{ns}", f.auth(f.loadNamespace))
	mux.HandleFunc("HEAD /v1/{prefix}/namespaces/{ns}", f.auth(f.loadNamespace))
	mux.HandleFunc("POST /v1/{prefix}/namespaces/{ns}/tables", f.auth(f.createTable))
	mux.HandleFunc("GET /v1/{prefix}/namespaces/{ns}/tables/{tbl}", f.auth(f.loadTable))
	mux.HandleFunc("HEAD /v1/{prefix}/namespaces/{ns}/tables/{tbl}", f.auth(f.loadTable))
	mux.HandleFunc("POST /v1/{prefix}/namespaces/{ns}/tables/{tbl}", f.auth(f.commitTable))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("REST fixture: unexpected %s %s", r.Method, r.URL)
		restError(w, http.StatusNotImplemented, "NotImplemented", "not in the fixture")
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func restError(w http.ResponseWriter, code int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": code}})
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func (f *restFixture) oauth(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.Form.Get("grant_type") != "client_credentials" {
		restError(w, http.StatusBadRequest, "invalid_request", "want grant_type=client_credentials")
		return
	}
	if r.Form.Get("client_id") != f.clientID || r.Form.Get("client_secret") != f.secret {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_client", "error_description": "unknown client or wrong secret"})
		return
	}
	f.mu.Lock()
	tok := fmt.Sprintf("issued-%d", len(f.issued)+1)
	f.issued = append(f.issued, tok)
	f.mu.Unlock()
	reply(w, map[string]any{"access_token": tok, "token_type": "bearer", "expires_in": 3600, "issued_token_type": "urn:ietf:params:oauth:token-type:access_token"})
}

// auth lets requests with a valid bearer token through.
func (f *restFixture) auth(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		f.mu.Lock()
		ok := tok == f.token && tok != ""
		for _, t := range f.issued {
			ok = ok || tok == t
		}
		if !ok {
			f.unauthed++
		}
		f.mu.Unlock()
		if !ok {
			restError(w, http.StatusUnauthorized, "NotAuthorizedException", "missing or invalid bearer token")
			return
		}
		h(w, r)
	}
}

func (f *restFixture) config(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.warehouses = append(f.warehouses, r.URL.Query().Get("warehouse"))
	f.mu.Unlock()
	reply(w, map[string]any{"defaults": map[string]string{}, "overrides": map[string]string{"prefix": "wh"}})
}

func (f *restFixture) createNamespace(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Namespace  []string           `json:"namespace"`
		Properties iceberg.Properties `json:"properties"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		restError(w, http.StatusBadRequest, "BadRequestException", err.Error())
		return
	}
	err := f.backend.CreateNamespace(r.Context(), req.Namespace, req.Properties)
	switch {
	case errors.Is(err, icecat.ErrNamespaceAlreadyExists):
		restError(w, http.StatusConflict, "AlreadyExistsException", err.Error())
	case err != nil:
		restError(w, http.StatusInternalServerError, "ServerError", err.Error())
	default:
		reply(w, map[string]any{"namespace": req.Namespace, "properties": req.Properties})
	}
}

// listNamespaces and listTables answer in one page: the fixture's
// catalogs are small.
func (f *restFixture) listNamespaces(w http.ResponseWriter, r *http.Request) {
	nss, err := f.backend.ListNamespaces(r.Context(), nil)
	if err != nil {
		restError(w, http.StatusInternalServerError, "ServerError", err.Error())
		return
	}
	reply(w, map[string]any{"namespaces": nss})
}

func (f *restFixture) listTables(w http.ResponseWriter, r *http.Request) {
	type ident struct {
		Namespace []string `json:"namespace"`
		Name      string   `json:"name"`
	}
	ids := []ident{}
	for id, err := range f.backend.ListTables(r.Context(), strings.Split(r.PathValue("ns"), "\x1f")) {
		if err != nil {
			restError(w, http.StatusNotFound, "NoSuchNamespaceException", err.Error())
			return
		}
		ids = append(ids, ident{Namespace: id[:len(id)-1], Name: id[len(id)-1]})
	}
	reply(w, map[string]any{"identifiers": ids})
}

func (f *restFixture) loadNamespace(w http.ResponseWriter, r *http.Request) {
	ns := strings.Split(r.PathValue("ns"), "\x1f")
	props, err := f.backend.LoadNamespaceProperties(r.Context(), ns)
	if err != nil {
		restError(w, http.StatusNotFound, "NoSuchNamespaceException", err.Error())
		return
	}
	reply(w, map[string]any{"namespace": ns, "properties": props})
}

func (f *restFixture) ident(r *http.Request) table.Identifier {
	return append(strings.Split(r.PathValue("ns"), "\x1f"), r.PathValue("tbl"))
}

func (f *restFixture) replyTable(w http.ResponseWriter, tbl *table.Table) {
	f.mu.Lock()
	cfg := f.tableConfig
	f.mu.Unlock()
	reply(w, map[string]any{"metadata-location": tbl.MetadataLocation(), "metadata": tbl.Metadata(), "config": cfg})
}

func (f *restFixture) createTable(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name       string             `json:"name"`
		Schema     *iceberg.Schema    `json:"schema"`
		Properties iceberg.Properties `json:"properties"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		restError(w, http.StatusBadRequest, "BadRequestException", err.Error())
		return
	}
	ident := append(strings.Split(r.PathValue("ns"), "\x1f"), req.Name)
	tbl, err := f.backend.CreateTable(r.Context(), ident, req.Schema, icecat.WithProperties(req.Properties))
	switch {
	case errors.Is(err, icecat.ErrTableAlreadyExists):
		restError(w, http.StatusConflict, "AlreadyExistsException", err.Error())
	case err != nil:
		restError(w, http.StatusInternalServerError, "ServerError", err.Error())
	default:
		f.replyTable(w, tbl)
	}
}

func (f *restFixture) loadTable(w http.ResponseWriter, r *http.Request) {
	tbl, err := f.backend.LoadTable(r.Context(), f.ident(r))
	if err != nil {
		restError(w, http.StatusNotFound, "NoSuchTableException", err.Error())
		return
	}
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	f.replyTable(w, tbl)
}

func (f *restFixture) commitTable(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Requirements table.Requirements `json:"requirements"`
		Updates      table.Updates      `json:"updates"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		restError(w, http.StatusBadRequest, "BadRequestException", err.Error())
		return
	}
	if d := time.Duration(f.delay.Load()); d > 0 {
		time.Sleep(d)
	}
	meta, loc, err := f.backend.CommitTable(r.Context(), f.ident(r), req.Requirements, req.Updates)
	if n := f.lose.Load(); err == nil && n > 0 && f.lose.CompareAndSwap(n, n-1) {
		if conn, _, herr := http.NewResponseController(w).Hijack(); herr == nil {
			conn.Close()
			return
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		if errors.Is(err, table.ErrCommitFailed) || strings.Contains(err.Error(), "requirement failed") {
			f.conflicts++
			restError(w, http.StatusConflict, "CommitFailedException", err.Error())
			return
		}
		restError(w, http.StatusInternalServerError, "ServerError", err.Error())
		return
	}
	f.commits++
	reply(w, map[string]any{"metadata-location": loc, "metadata": meta})
}

// TestRESTCatalog sinks through a REST catalog with OAuth2 client
// credentials and a warehouse name, twice (the second run resumes from the
// ledger read through REST), then checks the table through REST with a
// static token; a wrong client secret and an unreachable catalog are
// reported as such without showing the secret.
func TestRESTCatalog(t *testing.T) {
	f := newRESTFixture(t)
	st, _, _ := partitionedStack(t, "orders", 2)
	count := map[int32]int64{}
	produceRound(t, st.Brokers, "orders", 2, 200, count)
	args := []string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.orders", "--stop-at-end",
		"--catalog", f.srv.URL, "--warehouse", "analytics", "--flush-records", "60"}
	t.Setenv("FLOE_CATALOG_CREDENTIAL", f.clientID+":"+f.secret)
	mustFloe(t, args...)
	produceRound(t, st.Brokers, "orders", 2, 40, count)
	if out := mustFloe(t, args...); !strings.Contains(out, "40 rows") {
		t.Errorf("second run should add 40 rows:\n%s", out)
	}
	os.Unsetenv("FLOE_CATALOG_CREDENTIAL")
	checkTable(t, catalog.Config{Catalog: f.srv.URL, Warehouse: "analytics", Token: f.token}, "lake.orders", "orders", count)

	f.mu.Lock()
	if len(f.issued) == 0 || f.commits < 5 || f.unauthed != 0 {
		t.Errorf("tokens issued %d, commits %d, unauthorised requests %d", len(f.issued), f.commits, f.unauthed)
	}
	for _, wh := range f.warehouses {
		if wh != "analytics" {
			t.Errorf("GET /v1/config asked for warehouse %q, want analytics", wh)
		}
	}
	f.mu.Unlock()

	code, _, errs := floe(t, append(args, "--catalog-credential", f.clientID+":wrong-secret-77")...)
	if code != exitError || !strings.Contains(errs, "catalog rejected the credentials") || strings.Contains(errs, "wrong-secret-77") {
		t.Errorf("wrong secret: exit %d\n%s", code, errs)
	}
	closed := "http://" + refusedTCPAddr(t)
	code, _, errs = floe(t, append(args, "--catalog", closed, "--catalog-token", "x")...)
	if code != exitError || !strings.Contains(errs, "catalog unreachable") {
		t.Errorf("unreachable: exit %d\n%s", code, errs)
	}
}
