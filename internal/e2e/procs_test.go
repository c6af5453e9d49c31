package e2e_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"github.com/compactorhq/compactor/gen/compactor/v1/compactorv1connect"
)

// This file holds the helpers of the tests that run real compactor
// processes (several `compactor serve` replicas on one PostgreSQL catalog
// and one VersityGW bucket): the binary, a fresh database, the S3 server and
// the replicas themselves.

// skipOrFail skips the test with the reason, except under CI=true, where a
// missing dependency is a failure: CI must run these tests.
func skipOrFail(t *testing.T, reason string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(reason + " (required under CI=true)")
	}
	t.Skip(reason)
}

// repoRoot is the module root, two levels above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// postgresAdminURL is the server the tests create their database on:
// COMPACTOR_TEST_POSTGRES_DSN, else the local server of this project.
func postgresAdminURL() string {
	if dsn := os.Getenv("COMPACTOR_TEST_POSTGRES_DSN"); dsn != "" {
		return dsn
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// freshDatabase creates a new, empty PostgreSQL database and returns its
// URL; it is dropped (WITH (FORCE)) when the test ends. Skips (fails under
// CI=true) when PostgreSQL does not answer.
func freshDatabase(t *testing.T) string {
	t.Helper()
	admin := postgresAdminURL()
	db, err := sql.Open("pgx", admin)
	if err != nil {
		skipOrFail(t, fmt.Sprintf("PostgreSQL at %s: %v", admin, err))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		skipOrFail(t, fmt.Sprintf("PostgreSQL does not answer at %s: %v (set COMPACTOR_TEST_POSTGRES_DSN)", admin, err))
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "compactor_replicas_" + hex.EncodeToString(b)
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		_ = db.Close()
		t.Fatalf("CREATE DATABASE %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("DROP DATABASE %s: %v", name, err)
		}
		_ = db.Close()
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// buildCompactor builds cmd/compactor into a temporary directory and
// returns the binary's path.
func buildCompactor(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "compactor")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/compactor")
	cmd.Dir = repoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/compactor: %v\n%s", err, out)
	}
	return bin
}

// s3Server is a VersityGW gateway on a loopback port with one bucket.
type s3Server struct {
	blobURL string   // --blob-url of the bucket
	env     []string // the credentials, for the child processes only
}

// startS3 starts VersityGW (posix backend) over a temporary directory with
// one empty bucket; it is killed when the test ends. The binary is
// $VERSITYGW, versitygw on PATH, or .cache/bin/versitygw (scripts/test.sh
// builds it there); without one the test skips (fails under CI=true). The
// credentials are handed to the child processes, never set in this one.
func startS3(t *testing.T, deadline time.Time) s3Server {
	t.Helper()
	bin := os.Getenv("VERSITYGW")
	if bin == "" {
		if p, err := exec.LookPath("versitygw"); err == nil {
			bin = p
		} else if p := filepath.Join(repoRoot(t), ".cache", "bin", "versitygw"); fileExists(p) {
			bin = p
		} else {
			skipOrFail(t, "versitygw not found (set VERSITYGW, put it on PATH, or build it: go build -modfile=tools/go.mod -o .cache/bin/ github.com/versity/versitygw/cmd/versitygw)")
		}
	}
	const bucket = "compactor-replicas"
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, bucket), 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"AWS_ACCESS_KEY_ID=compactor-replicas", "AWS_SECRET_ACCESS_KEY=compactor-replicas-secret", "AWS_EC2_METADATA_DISABLED=true"}
	// The port is picked free and handed over; another process may take it
	// in between, so a gateway that exits at start is retried.
	var errs []error
	for attempt := range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		_ = ln.Close()
		logPath := filepath.Join(t.TempDir(), fmt.Sprintf("versitygw-%d.log", attempt))
		logFile, err := os.Create(logPath)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "--port", addr, "--access", "compactor-replicas", "--secret", "compactor-replicas-secret", "posix", root)
		cmd.Stdout, cmd.Stderr = logFile, logFile
		if err := cmd.Start(); err != nil {
			_ = logFile.Close()
			t.Fatalf("run %s: %v", bin, err)
		}
		_ = logFile.Close()
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		up := false
		for !up && time.Now().Before(deadline) {
			select {
			case <-exited:
			default:
				if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
					_ = c.Close()
					up = true
					continue
				}
				time.Sleep(20 * time.Millisecond)
				continue
			}
			break
		}
		if !up {
			_ = cmd.Process.Kill()
			<-exited
			b, _ := os.ReadFile(logPath)
			errs = append(errs, fmt.Errorf("versitygw on %s did not start: %s", addr, strings.TrimSpace(string(b))))
			continue
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
		q := url.Values{}
		q.Set("endpoint", "http://"+addr)
		q.Set("use_path_style", "true")
		q.Set("region", "us-east-1")
		return s3Server{blobURL: "s3://" + bucket + "?" + q.Encode(), env: env}
	}
	t.Fatalf("start versitygw: %v", errors.Join(errs...))
	return s3Server{}
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// replica is one `compactor serve` process.
type replica struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{} // closed when the process has exited
	addr    string        // host:port it serves on
	base    string        // http://addr

	colls       compactorv1connect.CollectionServiceClient
	logs        compactorv1connect.LogServiceClient
	compactions compactorv1connect.CompactionServiceClient
}

var servingRE = regexp.MustCompile(`msg=serving addr=([0-9.]+:[0-9]+)`)

// startReplica starts `compactor serve` named name on a loopback port 0 on
// the shared catalog and bucket, with the flags given after the storage
// ones, and waits until it logs its address and its /readyz answers 200.
// At the end of the test a replica still running gets SIGTERM (SIGKILL if
// it does not stop), a stopped one SIGCONT first.
func startReplica(t *testing.T, deadline time.Time, bin, name, catalogURL string, s3 s3Server, flags ...string) *replica {
	t.Helper()
	r := &replica{name: name, logPath: filepath.Join(t.TempDir(), name+".log"), exited: make(chan struct{})}
	logFile, err := os.Create(r.logPath)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(),
		"--catalog", catalogURL, "--blob-url", s3.blobURL, "--log-format", "text", "--node", name, "--shutdown-delay", "0"}, flags...)
	r.cmd = exec.Command(bin, args...)
	r.cmd.Env = append(os.Environ(), s3.env...)
	r.cmd.Stdout, r.cmd.Stderr = logFile, logFile
	if err := r.cmd.Start(); err != nil {
		_ = logFile.Close()
		t.Fatalf("start replica %s: %v", name, err)
	}
	_ = logFile.Close()
	go func() { _ = r.cmd.Wait(); close(r.exited) }()
	t.Cleanup(func() { r.stop(t) })

	for r.addr == "" {
		if m := servingRE.FindStringSubmatch(r.log()); m != nil {
			r.addr = m[1]
			break
		}
		r.waitTick(t, deadline, "log its address")
	}
	r.base = "http://" + r.addr
	r.colls = compactorv1connect.NewCollectionServiceClient(http.DefaultClient, r.base)
	r.logs = compactorv1connect.NewLogServiceClient(http.DefaultClient, r.base)
	r.compactions = compactorv1connect.NewCompactionServiceClient(http.DefaultClient, r.base)
	for !r.ready() {
		r.waitTick(t, deadline, "answer 200 on /readyz")
	}
	return r
}

// waitTick fails the test when the replica exited or the deadline passed,
// and otherwise waits a little before the next look.
func (r *replica) waitTick(t *testing.T, deadline time.Time, what string) {
	t.Helper()
	select {
	case <-r.exited:
		t.Fatalf("replica %s exited before it could %s:\n%s", r.name, what, r.tail(40))
	default:
	}
	if time.Now().After(deadline) {
		t.Fatalf("replica %s did not %s by the test's deadline:\n%s", r.name, what, r.tail(40))
	}
	time.Sleep(50 * time.Millisecond)
}

// ready reports whether GET /readyz answers 200.
func (r *replica) ready() bool {
	c := http.Client{Timeout: 5 * time.Second}
	res, err := c.Get(r.base + "/readyz")
	if err != nil {
		return false
	}
	_ = res.Body.Close()
	return res.StatusCode == http.StatusOK
}

func (r *replica) log() string {
	b, _ := os.ReadFile(r.logPath)
	return string(b)
}

// tail is the last n lines of the replica's log.
func (r *replica) tail(n int) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(r.log()))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (r *replica) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := r.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("send %s to replica %s: %v", sig, r.name, err)
	}
}

// stop ends the replica if it still runs: SIGCONT (in case it was
// stopped), SIGTERM, and SIGKILL after 30 s.
func (r *replica) stop(t *testing.T) {
	select {
	case <-r.exited:
		return
	default:
	}
	_ = r.cmd.Process.Signal(syscall.SIGCONT)
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.exited:
	case <-time.After(30 * time.Second):
		t.Logf("replica %s did not stop within 30 s of SIGTERM; killing it", r.name)
		_ = r.cmd.Process.Kill()
		<-r.exited
	}
	if t.Failed() {
		t.Logf("replica %s log, last 30 lines:\n%s", r.name, r.tail(30))
	}
}
