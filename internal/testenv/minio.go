package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// MinIOEnv names an environment variable that may hold the path of the
// MinIO server binary to use.
const MinIOEnv = "FLOE_MINIO"

// MinIO starts a throwaway MinIO server (single drive) on a t.TempDir(),
// listening on a free port of 127.0.0.1, with its web console off, and
// stops it in t.Cleanup. The binary is $FLOE_MINIO, else minio on PATH,
// else $(go env GOPATH)/bin/minio, which .ci/install-servers.sh builds
// from the pin in tools/minio/go.mod (about five minutes on two cores, so
// tests never build it themselves). When none is there the test is
// skipped, or fails under FLOE_REQUIRE_SERVERS=1.
//
// MinIO is AGPL-3.0: floe only starts it as a separate process for tests
// and never imports it.
func MinIO(t testing.TB) *S3Server {
	t.Helper()
	bin, err := minioBinary()
	if err != nil {
		unavailable(t, "no MinIO server binary: %v", err)
	}
	certs := t.TempDir()
	return startS3(t, &S3Server{
		Kind:             "minio",
		ChecksSignatures: true,
		KeepsData:        true,
		command: func(s *S3Server) *exec.Cmd {
			cmd := exec.Command(bin, "server",
				"--address", "127.0.0.1:"+strconv.Itoa(s.Port),
				"--certs-dir", certs,
				"--quiet",
				s.Dir)
			cmd.Env = append(os.Environ(),
				"MINIO_ROOT_USER="+s.AccessKey,
				"MINIO_ROOT_PASSWORD="+s.SecretKey,
				"MINIO_REGION="+s.Region,
				"MINIO_BROWSER=off",
				"MINIO_UPDATE=off",
				"MINIO_CALLHOME_ENABLE=off",
			)
			return cmd
		},
	})
}

// minioMemo makes the lookup happen once per test process.
var minioMemo memo

// minioBinary finds the MinIO binary, once per process.
func minioBinary() (string, error) {
	return minioMemo.get(func() (string, error) {
		gopathBin := filepath.Join(goPath(goCommand()), "bin", "minio")
		p, err := findBinary(MinIOEnv, "minio", gopathBin)
		if p == "" && err == nil {
			err = fmt.Errorf("not in $%s, on PATH or at %s (.ci/install-servers.sh builds it from tools/minio/go.mod in about five minutes)",
				MinIOEnv, gopathBin)
		}
		return p, err
	})
}
