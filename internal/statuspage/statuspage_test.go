package statuspage

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func get(t *testing.T, h http.Handler, path string) (int, http.Header, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	b, err := io.ReadAll(rec.Result().Body)
	if err != nil {
		t.Fatal(err)
	}
	return rec.Code, rec.Header(), string(b)
}

// The page is static and self-contained; the document is the source's,
// asked at most once a second however often it is read; a failing source
// is a 503 whose error the page shows, its <, > and & as they are (as in
// floe status --json).
func TestHandler(t *testing.T) {
	var calls atomic.Int32
	fail := false
	h := Handler(func(context.Context) (Page, error) {
		calls.Add(1)
		if fail {
			return Page{}, errors.New("catalog unreachable: offsets < 5 & more")
		}
		return Page{Source: SourceTable, GeneratedAt: time.Now(), Pipelines: []Pipeline{{Table: "lake.orders"}}}, nil
	})
	code, hdr, body := get(t, h, PathPage)
	if code != http.StatusOK || !strings.HasPrefix(hdr.Get("Content-Type"), "text/html") || !strings.Contains(body, `fetch("status.json"`) {
		t.Fatalf("page: %d %v", code, hdr)
	}
	for _, bad := range []string{"<link", " src=", "http://", "https://", "@import"} {
		if strings.Contains(body, bad) {
			t.Errorf("the page refers to something outside itself: %q", bad)
		}
	}
	for range 3 {
		code, _, body = get(t, h, PathJSON)
		var p Page
		if err := json.Unmarshal([]byte(body), &p); err != nil || code != http.StatusOK || p.Pipelines[0].Table != "lake.orders" {
			t.Fatalf("document: %d %v %s", code, err, body)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("three reads within a second asked the source %d times, want once", n)
	}
	fail = true
	time.Sleep(minInterval)
	code, _, body = get(t, h, PathJSON)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"error":"catalog unreachable: offsets < 5 & more"`) {
		t.Errorf("failing source: %d %s", code, body)
	}
	if code, _, _ := get(t, h, "/other"); code != http.StatusNotFound {
		t.Errorf("/other: %d, want 404", code)
	}
}
