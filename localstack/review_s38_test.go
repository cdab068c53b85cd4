package localstack

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"sync"
	"testing"

	"github.com/johannesboyne/gofakes3/backend/s3afero"
)

// blockingReader returns a few bytes, then waits for release and fails:
// an upload whose client went away mid-body.
type blockingReader struct {
	started chan struct{}
	release chan struct{}
	n       int
}

func (r *blockingReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		r.n++
		close(r.started)
		p[0] = 'x'
		return 1, nil
	}
	<-r.release
	return 0, errors.New("connection reset by peer")
}

// TestS38PutObjectCutRemovesTheRetry: an upload is cut mid-body while its
// client's retry of the same object waits for the backend's lock (a
// client that timed out and retried on a new connection). fileBackend's
// PutObject removes "what the cut upload left" after the backend released
// its lock: when the retry got the lock first and wrote the whole object
// (answered 200), the removal deletes the retry's object. S3 keeps the
// object a successful PUT wrote.
func TestS38PutObjectCutRemovesTheRetry(t *testing.T) {
	lost := 0
	const rounds = 6000
	for i := range rounds {
		fs, err := s3afero.FsPath(t.TempDir(), s3afero.FsPathCreateAll)
		if err != nil {
			t.Fatal(err)
		}
		backend, err := s3afero.MultiBucket(fs)
		if err != nil {
			t.Fatal(err)
		}
		if err := backend.CreateBucket("b"); err != nil {
			t.Fatal(err)
		}
		b := newFileBackend(backend)
		body := bytes.Repeat([]byte("d"), 1<<10)
		cut := &blockingReader{started: make(chan struct{}), release: make(chan struct{})}
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, _ = b.PutObject("b", "k", map[string]string{}, cut, 1<<10, nil)
		}()
		<-cut.started
		var retryErr error
		go func() {
			defer wg.Done()
			_, retryErr = b.PutObject("b", "k", map[string]string{}, bytes.NewReader(body), int64(len(body)), nil)
		}()
		// Let the retry queue on the lock, then cut the first upload.
		for range 100 {
			runtimeGosched()
		}
		close(cut.release)
		wg.Wait()
		if retryErr != nil {
			continue
		}
		obj, err := b.GetObject("b", "k", nil)
		if err != nil {
			lost++
			if lost == 1 {
				t.Logf("round %d: the retry's PUT succeeded, then GetObject: %v", i, err)
			}
			continue
		}
		got, _ := io.ReadAll(obj.Contents)
		obj.Contents.Close()
		if !bytes.Equal(got, body) {
			lost++
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d rounds: a PUT answered success, and its object is gone (or not what it wrote)", lost, rounds)
	}
}

func runtimeGosched() { runtime.Gosched() }
