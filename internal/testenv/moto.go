package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// MotoEnv names an environment variable that may hold the path of moto's
// server command (moto_server) to use.
const MotoEnv = "FLOE_MOTO_SERVER"

// Moto starts a throwaway moto server (moto_server, from the Python package
// moto) on a free port of 127.0.0.1 and stops it in t.Cleanup. One
// endpoint serves every AWS service moto emulates, among them S3 and Glue:
// point the AWS SDK at Endpoint with AWS_ENDPOINT_URL (or
// AWS_ENDPOINT_URL_S3 and AWS_ENDPOINT_URL_GLUE) and the server's keys.
// moto accepts any credentials and keeps its state in memory, so a Stop
// and Start loses it. The command is found by motoBinary (the machines'
// images have moto 5.2.1 on PATH). When it is missing the test is
// skipped, or fails under FLOE_REQUIRE_SERVERS=1.
func Moto(t testing.TB) *S3Server {
	t.Helper()
	bin, err := motoBinary()
	if err != nil {
		unavailable(t, "no moto_server: %v", err)
	}
	return startS3(t, &S3Server{
		Kind: "moto",
		command: func(s *S3Server) *exec.Cmd {
			cmd := exec.Command(bin, "-H", "127.0.0.1", "-p", strconv.Itoa(s.Port))
			cmd.Dir = s.Dir
			cmd.Env = append(os.Environ(), "PYTHONUNBUFFERED=1")
			return cmd
		},
	})
}

// motoMemo makes the lookup happen once per test process.
var motoMemo memo

// motoBinary finds moto_server, once per process: $FLOE_MOTO_SERVER, else
// on PATH, else in floe/moto/bin of the user cache, where
// .ci/install-servers.sh links an installed moto_server that is not on
// PATH, or installs moto[server] into a virtual environment.
func motoBinary() (string, error) {
	return motoMemo.get(func() (string, error) {
		venv := "the user cache"
		var paths []string
		if cache, err := os.UserCacheDir(); err == nil {
			venv = filepath.Join(cache, "floe", "moto")
			paths = append(paths, filepath.Join(venv, "bin", "moto_server"))
		}
		p, err := findBinary(MotoEnv, "moto_server", paths...)
		if p == "" && err == nil {
			err = fmt.Errorf("not in $%s, on PATH or in %s (.ci/install-servers.sh puts it there)", MotoEnv, venv)
		}
		return p, err
	})
}
