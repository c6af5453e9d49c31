package segmenttest

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// VersityGWEnv names the environment variable holding the path of the
// versitygw binary; when unset, versitygw is looked up on PATH
// (scripts/test.sh builds it from tools/go.mod into .cache/bin, on its PATH).
const VersityGWEnv = "VERSITYGW"

// S3 credentials of the gateways StartVersityGW starts.
const (
	versityAccess = "compactortest"
	versitySecret = "compactortest-secret"
)

// StartVersityGW starts a VersityGW S3 server (posix backend) on a free
// loopback port over a temporary directory of t, with one empty bucket, and
// returns the s3:// blob URL of that bucket (endpoint, path-style
// addressing and region in the URL). It sets AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY for the test (t.Setenv, so the test must not be
// parallel) and stops the server when the test ends.
//
// When the binary cannot be found the test is skipped with the reason,
// except under CI=true, where it fails: CI must run the S3 tests.
func StartVersityGW(t testing.TB) string {
	t.Helper()
	bin := os.Getenv(VersityGWEnv)
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("versitygw"); err != nil {
			msg := "versitygw not found (set " + VersityGWEnv + " or put it on PATH; scripts/test.sh builds it: go build -modfile=tools/go.mod -o .cache/bin/ github.com/versity/versitygw/cmd/versitygw)"
			if os.Getenv("CI") == "true" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
	root := t.TempDir()
	const bucket = "compactor-test"
	// posix backend: a bucket is a directory under the root.
	if err := os.Mkdir(filepath.Join(root, bucket), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", versityAccess)
	t.Setenv("AWS_SECRET_ACCESS_KEY", versitySecret)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")

	// The port is picked free, then handed to the server; another process
	// may take it in between, so a server that exits at start is retried.
	var errs []error
	for attempt := range 3 {
		addr, err := freeLoopbackAddr()
		if err != nil {
			t.Fatal(err)
		}
		logPath := filepath.Join(t.TempDir(), fmt.Sprintf("versitygw-%d.log", attempt))
		if err := startVersity(t, bin, addr, root, logPath); err != nil {
			errs = append(errs, err)
			continue
		}
		q := url.Values{}
		q.Set("endpoint", "http://"+addr)
		q.Set("use_path_style", "true")
		q.Set("region", "us-east-1")
		return "s3://" + bucket + "?" + q.Encode()
	}
	t.Fatalf("start versitygw: %v", errors.Join(errs...))
	return ""
}

func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

// startVersity runs the server and waits until its port accepts
// connections or it exits (an error with its log). It is stopped when the
// test ends.
func startVersity(t testing.TB, bin, addr, root, logPath string) error {
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(bin, "--port", addr, "--access", versityAccess, "--secret", versitySecret, "posix", root)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("run %s: %w", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
	}
	// Bounded only as a safeguard against a hung server; the loop ends on
	// the events (the port answers, the process exits).
	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case err := <-exited:
			exited <- err
			return fmt.Errorf("versitygw on %s exited at start (%v): %s", addr, err, readLog(logPath))
		default:
		}
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = conn.Close()
			t.Cleanup(stop)
			return nil
		}
		if time.Now().After(deadline) {
			stop()
			return fmt.Errorf("versitygw on %s did not accept connections in 2 minutes: %s", addr, readLog(logPath))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func readLog(path string) string {
	b, _ := os.ReadFile(path)
	return strings.TrimSpace(string(b))
}
