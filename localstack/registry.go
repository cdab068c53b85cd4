package localstack

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
)

// DefaultRegistryPort is the schema registry's loopback port in Up, beside
// the broker and S3 (Confluent's default is 8081).
const DefaultRegistryPort = 18081

// maxRegistryRequest bounds the body of a request to the local registry,
// which reads it whole to journal it; Confluent's own limit on a schema is
// far below.
const maxRegistryRequest = 16 << 20

// RegistryServer is an in-process Confluent Schema Registry (franz-go's
// srfake, in memory) served over HTTP on loopback TCP, so that floe and
// any other client (Confluent's serializers, kcat -s, curl) reach it as
// they reach a real one. It checks no credentials.
//
// With a journal file, every request that changes the registry is
// appended to the file before it is answered, and replayed from it at
// start: a restart finds the same subjects, versions and schema IDs, so
// the records already in the broker's log still decode.
type RegistryServer struct {
	// URL is http://127.0.0.1:PORT.
	URL string
	srv *http.Server

	handler   http.Handler
	journaled bool       // set at start: changes go through the journal
	mu        sync.Mutex // orders changes and their journal lines alike
	journal   *os.File   // nil when not journaled, or closed
	size      int64      // of the journal's complete lines
}

// journalEntry is one line of the journal: a request that changed the
// registry.
type journalEntry struct {
	Method string `json:"method"`
	URI    string `json:"uri"`
	Body   []byte `json:"body,omitempty"`
}

// StartRegistry serves a schema registry on 127.0.0.1:port (0: a free
// port). A non-empty journal is the file that keeps its changes across
// restarts: replayed at start, appended to while it runs. ctx bounds the
// start only; once started, the server runs until Close.
func StartRegistry(ctx context.Context, port int, journal string) (*RegistryServer, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("local schema registry: %w", err)
	}
	s := &RegistryServer{handler: srfake.NewRegistry().Handler()}
	if journal != "" {
		f, err := s.replay(ctx, journal)
		if err != nil {
			return nil, err
		}
		s.journal, s.journaled = f, true
	}
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		s.closeJournal()
		return nil, fmt.Errorf("local schema registry: listen on port %d (is another local stack running?): %w", port, err)
	}
	s.URL = "http://" + l.Addr().String()
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := s.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			slog.Error("local schema registry stopped", "err", err)
		}
	}()
	return s, nil
}

// replay applies the journal's requests to the empty registry in order and
// opens the journal for appending. A last line cut short (a crash while
// writing it) was never answered, so it is dropped.
func (s *RegistryServer) replay(ctx context.Context, path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("local schema registry: open journal: %w", err)
	}
	var good int64
	r := bufio.NewReader(f)
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			break // a line without its newline is one cut short
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("local schema registry: read journal %s: %w", path, err)
		}
		var e journalEntry
		if err := json.Unmarshal(line, &e); err != nil {
			f.Close()
			return nil, fmt.Errorf("local schema registry: journal %s line %d: %w", path, n, err)
		}
		req, err := http.NewRequestWithContext(ctx, e.Method, e.URI, bytes.NewReader(e.Body))
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("local schema registry: journal %s line %d: %w", path, n, err)
		}
		req.Header.Set("Content-Type", "application/vnd.schemaregistry.v1+json")
		rec := httptest.NewRecorder()
		s.handler.ServeHTTP(rec, req)
		if rec.Code >= 300 {
			f.Close()
			return nil, fmt.Errorf("local schema registry: journal %s line %d (%s %s) fails on replay: HTTP %d %s",
				path, n, e.Method, e.URI, rec.Code, strings.TrimSpace(rec.Body.String()))
		}
		good += int64(len(line))
	}
	if err := f.Truncate(good); err != nil {
		f.Close()
		return nil, fmt.Errorf("local schema registry: journal %s: %w", path, err)
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("local schema registry: journal %s: %w", path, err)
	}
	s.size = good
	return f, nil
}

// serve answers reads directly; a change is applied, journaled and only
// then answered, one at a time, so that the journal holds every change a
// client saw succeed, in the order the registry applied them (which
// decides the IDs a replay assigns).
func (s *RegistryServer) serve(w http.ResponseWriter, req *http.Request) {
	if !s.journaled || !changes(req) {
		s.handler.ServeHTTP(w, req)
		return
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, maxRegistryRequest+1))
	if err != nil || len(body) > maxRegistryRequest {
		http.Error(w, "request body unreadable or over 16 MiB", http.StatusRequestEntityTooLarge)
		return
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.journal == nil {
		http.Error(w, "local schema registry: stopping", http.StatusServiceUnavailable)
		return
	}
	rec := httptest.NewRecorder()
	s.handler.ServeHTTP(rec, req)
	if rec.Code < 300 {
		if err := s.appendJournal(journalEntry{Method: req.Method, URI: req.URL.RequestURI(), Body: body}); err != nil {
			// The change is in memory but would not survive a restart;
			// the client sees a failure and tries again (registering the
			// same schema again is answered with the same ID).
			http.Error(w, "local schema registry: journal: "+err.Error(), http.StatusInternalServerError)
			return
		}
	}
	maps.Copy(w.Header(), rec.Header())
	w.WriteHeader(rec.Code)
	w.Write(rec.Body.Bytes())
}

// appendJournal writes e as one line and syncs it. A line written in part
// is cut off again, so that the lines after it stay readable.
func (s *RegistryServer) appendJournal(e journalEntry) error {
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	if _, err = s.journal.Write(line); err == nil {
		err = s.journal.Sync()
	}
	if err != nil {
		s.journal.Truncate(s.size)
		s.journal.Seek(s.size, io.SeekStart)
		return err
	}
	s.size += int64(len(line))
	return nil
}

// changes reports whether req may change the registry: registering a
// schema (POST .../subjects/S/versions), and every PUT and DELETE (config,
// mode, deletions). Other POSTs only look up or check compatibility.
func changes(req *http.Request) bool {
	switch req.Method {
	case http.MethodPut, http.MethodDelete:
		return true
	case http.MethodPost:
		p := req.URL.Path
		return strings.HasSuffix(strings.TrimSuffix(p, "/"), "/versions") && !strings.Contains(p, "/compatibility/")
	}
	return false
}

// Close stops the server, letting requests in flight finish for a moment,
// and closes the journal.
func (s *RegistryServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(err, s.closeJournal())
}

func (s *RegistryServer) closeJournal() error {
	if s.journal == nil {
		return nil
	}
	err := s.journal.Close()
	s.journal = nil
	return err
}

// RegisterSchema registers schema under subject (e.g. TOPIC-value, the
// subject Confluent's serializers use for a topic's values) in the schema
// registry at url, over its REST API as a producer would, and returns its
// ID. Registering a schema the subject already has returns its ID again.
func RegisterSchema(ctx context.Context, url, subject string, schema sr.Schema) (int, error) {
	cl, err := sr.NewClient(sr.URLs(url))
	if err != nil {
		return 0, fmt.Errorf("register schema under %s: %w", subject, err)
	}
	id, err := cl.RegisterSchema(ctx, subject, schema, -1, -1)
	if err != nil {
		return 0, fmt.Errorf("register schema under %s at %s: %w", subject, url, err)
	}
	return id, nil
}

// WireFormat frames an encoded value in the schema registry wire format:
// magic byte 0, the schema ID in 4 big-endian bytes, for Protobuf the
// message indexes (nil for Avro and JSON Schema; [0] for a .proto's first
// message), then the value. It is what Confluent's serializers produce.
func WireFormat(id int, indexes []int, value []byte) []byte {
	var h sr.ConfluentHeader
	b, _ := h.AppendEncode(make([]byte, 0, 6+len(value)), id, indexes) // never fails
	return append(b, value...)
}
