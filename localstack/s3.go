package localstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3afero"
)

// S3Server is an in-process S3 endpoint (gofakes3, MIT) on loopback TCP
// that keeps its buckets as plain files under a folder, so they survive a
// restart. It checks no credentials: any key pair is accepted. It is for
// the local stack only; tests of S3 behaviour use a real server
// (internal/testenv's versitygw).
type S3Server struct {
	// Endpoint is http://127.0.0.1:PORT, path-style addressing.
	Endpoint string
	// Dir holds the buckets (Dir/buckets/NAME/KEY) and object metadata.
	Dir string
	srv *http.Server
}

// StartS3 serves S3 on 127.0.0.1:port (0: a free port) from dir and creates
// the buckets that do not exist yet. ctx bounds the start only (a cancelled
// ctx creates no folder and opens no port); once started, the server runs
// until Close.
func StartS3(ctx context.Context, dir string, port int, buckets ...string) (*S3Server, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("local S3: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("local S3: %w", err)
	}
	fs, err := s3afero.FsPath(abs, s3afero.FsPathCreateAll)
	if err != nil {
		return nil, fmt.Errorf("local S3: folder %s: %w", abs, err)
	}
	backend, err := s3afero.MultiBucket(fs)
	if err != nil {
		return nil, fmt.Errorf("local S3: %w", err)
	}
	for _, b := range buckets {
		ok, err := backend.BucketExists(b)
		if err == nil && !ok {
			err = backend.CreateBucket(b)
		}
		if err != nil {
			return nil, fmt.Errorf("local S3: create bucket %s: %w", b, err)
		}
	}
	faker := gofakes3.New(newFileBackend(backend), gofakes3.WithLogger(gofakes3.DiscardLog()), gofakes3.WithAutoBucket(false))
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("local S3: listen on port %d (is another local stack running?): %w", port, err)
	}
	s := &S3Server{
		Endpoint: "http://" + l.Addr().String(),
		Dir:      abs,
		srv:      &http.Server{Handler: faker.Server(), ReadHeaderTimeout: 10 * time.Second},
	}
	go func() {
		if err := s.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			slog.Error("local S3 server stopped", "err", err)
		}
	}()
	return s, nil
}

// fileBackend is gofakes3's file backend with two of its answers made
// S3's, which floe's tools met on the local stack.
type fileBackend struct {
	*s3afero.MultiBucketBackend
	// puts serializes uploads with the removal of what a failed one
	// left: the backend holds its own lock while it writes, and releases
	// it before PutObject returns, so a retry of the same object waiting
	// for it could write the whole object before the removal, which would
	// then delete what the retry wrote (answered 200).
	puts *sync.Mutex
}

func newFileBackend(b *s3afero.MultiBucketBackend) fileBackend {
	return fileBackend{MultiBucketBackend: b, puts: &sync.Mutex{}}
}

// ListBucket lists no objects under a prefix no object has, where the
// file backend answers a delimited listing of a folder that does not
// exist with NoSuchBucket (floe maintain --remove-orphans of a table that
// has written no data file yet).
func (b fileBackend) ListBucket(bucket string, prefix *gofakes3.Prefix, page gofakes3.ListBucketPage) (*gofakes3.ObjectList, error) {
	list, err := b.MultiBucketBackend.ListBucket(bucket, prefix, page)
	if gofakes3.HasErrorCode(err, gofakes3.ErrNoSuchBucket) {
		if ok, existsErr := b.BucketExists(bucket); existsErr == nil && ok {
			return gofakes3.NewObjectList(), nil
		}
	}
	return list, err
}

// PutObject removes what an upload that failed while writing left (its
// client went away mid-body): the file backend keeps the partial file
// without the metadata it writes last, and every listing of the bucket
// failed on it for good after that. An upload refused before writing (a
// condition, a missing bucket: errors with an S3 code) leaves the object
// as it was.
func (b fileBackend) PutObject(bucket, key string, meta map[string]string, input io.Reader, size int64, conditions *gofakes3.PutConditions) (gofakes3.PutObjectResult, error) {
	b.puts.Lock()
	defer b.puts.Unlock()
	res, err := b.MultiBucketBackend.PutObject(bucket, key, meta, input, size, conditions)
	if _, coded := err.(interface{ ErrorCode() gofakes3.ErrorCode }); err != nil && !coded {
		if _, delErr := b.DeleteObject(bucket, key); delErr != nil {
			err = errors.Join(err, fmt.Errorf("remove the partial object: %w", delErr))
		}
	}
	return res, err
}

// Close stops the server, letting requests in flight finish for a moment.
func (s *S3Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.srv.Shutdown(ctx)
}
