package testenv

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// PostgresBinEnv names an environment variable that may hold the directory of
// the PostgreSQL server binaries (initdb, postgres).
const PostgresBinEnv = "FLOE_PG_BIN"

// PGServer is a throwaway PostgreSQL server started by Postgres. Its user is
// a superuser that owns Database.
type PGServer struct {
	// URI is "postgres://USER:PASSWORD@127.0.0.1:PORT/DATABASE?sslmode=disable".
	URI      string
	Host     string // "127.0.0.1"
	Port     int
	User     string
	Password string
	Database string
	// Dir holds the cluster (Dir/data), the server's unix socket and its log
	// (Dir/postgres.log). Local (unix socket) connections need no password.
	Dir string

	t       testing.TB
	binDir  string
	dataDir string
	logPath string
	asUID   int // -1: run as ourselves
	asGID   int

	mu   sync.Mutex
	proc *process
}

// Postgres initialises a PostgreSQL cluster in a temporary directory, starts
// it on a free port of 127.0.0.1 (TCP: password auth; unix socket in Dir:
// trust), creates the database and stops it all in t.Cleanup. It uses the
// Debian server binaries (/usr/lib/postgresql/*/bin, the newest), or
// $FLOE_PG_BIN. As root it runs the server as the "postgres" system user
// (else "nobody"), since PostgreSQL refuses to run as root. When the binaries
// are missing the test is skipped, or fails under FLOE_REQUIRE_SERVERS=1.
func Postgres(t testing.TB) *PGServer {
	t.Helper()
	binDir, err := postgresBinDir()
	if err != nil {
		unavailable(t, "no PostgreSQL server binaries: %v", err)
	}
	p := &PGServer{
		Host:     "127.0.0.1",
		User:     "floe",
		Password: randomHex(12),
		Database: "floe",
		t:        t,
		binDir:   binDir,
		asUID:    -1,
		asGID:    -1,
	}
	if os.Geteuid() == 0 {
		uid, gid, err := unprivilegedUser()
		if err != nil {
			t.Fatalf("testenv: running as root and %v", err)
		}
		p.asUID, p.asGID = uid, gid
	}
	// Not t.TempDir: its path can be too long for a unix socket (107 bytes)
	// and its parents are closed to other users.
	base, err := os.MkdirTemp("", "floe-pg-")
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	p.Dir = base
	p.dataDir = filepath.Join(base, "data")
	p.logPath = filepath.Join(base, "postgres.log")
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("postgres log (%s):\n%s", p.logPath, tail(p.logPath, 4000))
		}
		os.RemoveAll(base)
	})
	if p.asUID >= 0 {
		if err := os.Chown(base, p.asUID, p.asGID); err != nil {
			t.Fatalf("testenv: %v", err)
		}
	}
	if err := p.initdb(); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	for attempt := 0; ; attempt++ {
		port, err := FreePort()
		if err != nil {
			t.Fatalf("testenv: free port: %v", err)
		}
		p.Port = port
		p.URI = (&url.URL{
			Scheme:   "postgres",
			User:     url.UserPassword(p.User, p.Password),
			Host:     net.JoinHostPort(p.Host, strconv.Itoa(port)),
			Path:     "/" + p.Database,
			RawQuery: "sslmode=disable",
		}).String()
		err = p.start()
		if err == nil {
			return p
		}
		if attempt == 2 {
			t.Fatalf("testenv: start postgres: %v", err)
		}
	}
}

// Stop shuts the server down (fast shutdown: sessions are disconnected),
// waiting for it to exit. It is idempotent and safe from any goroutine.
func (p *PGServer) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.proc.stop(syscall.SIGINT, 15*time.Second)
	p.proc = nil
}

// Start starts the server again after Stop, on the same port and cluster,
// and waits until it accepts connections. It does nothing when the server
// runs. A failure fails the test with t.Errorf, so Start is safe to call from
// any goroutine.
func (p *PGServer) Start() {
	if err := p.start(); err != nil {
		p.t.Errorf("testenv: restart postgres: %v", err)
	}
}

// command returns a command running binary name of the server's bin dir as
// the server's user.
func (p *PGServer) command(name string, args ...string) (*exec.Cmd, error) {
	cmd := exec.Command(filepath.Join(p.binDir, name), args...)
	cmd.Dir = p.Dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "TZ=UTC")
	if p.asUID >= 0 {
		if err := runAs(cmd, uint32(p.asUID), uint32(p.asGID)); err != nil {
			return nil, err
		}
	}
	return cmd, nil
}

// initdb creates the cluster with its superuser and the database.
func (p *PGServer) initdb() error {
	pwfile := filepath.Join(p.Dir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(p.Password+"\n"), 0o600); err != nil {
		return err
	}
	defer os.Remove(pwfile)
	if p.asUID >= 0 {
		if err := os.Chown(pwfile, p.asUID, p.asGID); err != nil {
			return err
		}
	}
	cmd, err := p.command("initdb",
		"-D", p.dataDir,
		"-U", p.User,
		"--pwfile", pwfile,
		"--auth-local", "trust",
		"--auth-host", "scram-sha-256",
		"-E", "UTF8",
		"--locale", "C",
		"--no-sync")
	if err != nil {
		return err
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %v\n%s", err, out)
	}
	// Create the database in single-user mode: no client binaries needed.
	cmd, err = p.command("postgres", "--single", "-D", p.dataDir, "-F",
		"-c", "exit_on_error=true", "postgres")
	if err != nil {
		return err
	}
	cmd.Stdin = strings.NewReader(`CREATE DATABASE "` + p.Database + `";` + "\n")
	if out, err := cmd.CombinedOutput(); err != nil || bytes.Contains(out, []byte("ERROR")) {
		return fmt.Errorf("create database %s: %v\n%s", p.Database, err, out)
	}
	return nil
}

func (p *PGServer) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proc != nil && !p.proc.exited() {
		return nil
	}
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd, err := p.command("postgres",
		"-D", p.dataDir,
		"-p", strconv.Itoa(p.Port),
		"-c", "listen_addresses="+p.Host,
		"-c", "unix_socket_directories="+p.Dir,
		// Throwaway data: durability off for speed.
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off")
	if err != nil {
		return err
	}
	cmd.Stdout = logf
	cmd.Stderr = logf
	dieWithParent(cmd, syscall.SIGQUIT) // immediate shutdown
	proc, err := startProcess(cmd)
	if err != nil {
		return err
	}
	if err := waitPostgres(net.JoinHostPort(p.Host, strconv.Itoa(p.Port)), p.User, p.Database, proc, 30*time.Second); err != nil {
		proc.stop(syscall.SIGQUIT, 5*time.Second)
		return fmt.Errorf("%v; log:\n%s", err, tail(p.logPath, 2000))
	}
	p.proc = proc
	return nil
}

// waitPostgres polls addr until the server accepts a startup message for
// user and database (it asks for authentication), the process exits or the
// timeout passes.
func waitPostgres(addr, user, database string, proc *process, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if proc.exited() {
			return fmt.Errorf("postgres exited before accepting connections: %v", proc.err)
		}
		err := probePostgres(addr, user, database)
		if err == nil {
			return nil
		}
		var fatal *pgError
		if errors.As(err, &fatal) && fatal.code != "57P03" { // 57P03: cannot_connect_now (starting up)
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres at %s not ready after %s: %v", addr, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pgError is an ErrorResponse of the PostgreSQL protocol.
type pgError struct{ code, message string }

func (e *pgError) Error() string { return "postgres: " + e.code + ": " + e.message }

// probePostgres speaks just enough of the PostgreSQL protocol (v3) to know
// whether the server accepts sessions: it sends a StartupMessage and
// succeeds when the server answers with an authentication request.
func probePostgres(addr, user, database string) error {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	var body bytes.Buffer
	binary.Write(&body, binary.BigEndian, int32(196608)) // protocol 3.0
	for _, kv := range [][2]string{{"user", user}, {"database", database}} {
		body.WriteString(kv[0] + "\x00" + kv[1] + "\x00")
	}
	body.WriteByte(0)
	msg := binary.BigEndian.AppendUint32(nil, uint32(body.Len()+4))
	msg = append(msg, body.Bytes()...)
	if _, err := conn.Write(msg); err != nil {
		return err
	}
	r := bufio.NewReader(conn)
	typ, err := r.ReadByte()
	if err != nil {
		return err
	}
	var n uint32
	if err := binary.Read(r, binary.BigEndian, &n); err != nil {
		return err
	}
	if n < 4 || n > 1<<16 {
		return fmt.Errorf("postgres: bad message length %d", n)
	}
	payload := make([]byte, n-4)
	if _, err := io.ReadFull(r, payload); err != nil {
		return err
	}
	switch typ {
	case 'R':
		return nil
	case 'E':
		e := &pgError{}
		for _, field := range bytes.Split(payload, []byte{0}) {
			if len(field) < 1 {
				continue
			}
			switch field[0] {
			case 'C':
				e.code = string(field[1:])
			case 'M':
				e.message = string(field[1:])
			}
		}
		return e
	default:
		return fmt.Errorf("postgres: unexpected message %q", typ)
	}
}

// postgresBinDir finds the directory of initdb and postgres.
func postgresBinDir() (string, error) {
	has := func(dir string) bool {
		return isExecutable(filepath.Join(dir, "initdb")) && isExecutable(filepath.Join(dir, "postgres"))
	}
	if dir := os.Getenv(PostgresBinEnv); dir != "" {
		if !has(dir) {
			return "", fmt.Errorf("%s=%s holds no initdb and postgres", PostgresBinEnv, dir)
		}
		return dir, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { // newest major version first
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi > vj
	})
	for _, dir := range dirs {
		if has(dir) {
			return dir, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil && has(filepath.Dir(real)) {
			return filepath.Dir(real), nil
		}
		if has(filepath.Dir(p)) {
			return filepath.Dir(p), nil
		}
	}
	return "", errors.New("no initdb and postgres in /usr/lib/postgresql/*/bin nor on PATH (Debian: apt-get install postgresql)")
}

// unprivilegedUser returns the ids of the user to run the server as when
// we are root: "postgres", else "nobody".
func unprivilegedUser() (uid, gid int, err error) {
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.Atoi(u.Uid)
		gid, err2 := strconv.Atoi(u.Gid)
		if err1 == nil && err2 == nil {
			return uid, gid, nil
		}
	}
	return 0, 0, errors.New(`no "postgres" or "nobody" user to run PostgreSQL as`)
}
