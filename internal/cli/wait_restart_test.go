package cli

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/testutil"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/server"
)

// restartable is a real server on one data directory and one port that a
// test stops and starts again, in the states a restart goes through.
type restartable struct {
	t    *testing.T
	dir  string
	addr string // host:port, the same for every start
}

func newRestartable(t *testing.T) *restartable {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return &restartable{t: t, dir: t.TempDir(), addr: addr}
}

func (r *restartable) url() string { return "http://" + r.addr }

func (r *restartable) open() *server.App {
	r.t.Helper()
	cfg := server.DefaultConfig()
	cfg.DataDir, cfg.Listen = r.dir, r.addr
	cfg.Manager.Interval = time.Hour // no scheduled jobs: only the test's
	if err := cfg.Validate(); err != nil {
		r.t.Fatal(err)
	}
	app, err := server.Open(context.Background(), cfg, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	return app
}

// listen binds the port again (the previous process has released it).
func (r *restartable) listen() net.Listener {
	r.t.Helper()
	ln, err := net.Listen("tcp", r.addr)
	if err != nil {
		r.t.Fatalf("listen again on %s: %v", r.addr, err)
	}
	return ln
}

// starting serves the API of a process whose manager has not started: the
// state of a server between listening and recovering its jobs. Compact
// queues jobs that nothing runs yet; WatchCompactions answers UNAVAILABLE.
// stop kills it (connections closed, storage released).
func (r *restartable) starting() (app *server.App, stop func()) {
	r.t.Helper()
	app = r.open()
	srv := server.NewHTTPServer(app.Handler(), slog.New(slog.DiscardHandler))
	ln := r.listen()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = srv.Close()
			<-done
			if err := app.Close(); err != nil {
				r.t.Errorf("close: %v", err)
			}
		})
	}
	r.t.Cleanup(stop)
	return app, stop
}

// serving runs the whole server (recovery, manager, API) until stop.
func (r *restartable) serving() (stop func()) {
	r.t.Helper()
	app := r.open()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, r.listen(), func(net.Addr) { close(ready) }) }()
	select {
	case <-ready:
	case err := <-done:
		r.t.Fatalf("server stopped before serving: %v", err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				r.t.Errorf("server Run: %v", err)
			}
			if err := app.Close(); err != nil {
				r.t.Errorf("close: %v", err)
			}
		})
	}
	r.t.Cleanup(stop)
	return stop
}

// finishOffline runs the manager of a process without its API (clients find
// nothing listening) until job id has finished, then stops it.
func (r *restartable) finishOffline(id string) {
	r.t.Helper()
	app := r.open()
	defer func() {
		if err := app.Close(); err != nil {
			r.t.Errorf("close: %v", err)
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Manager.Run(ctx) }()
	<-app.Manager.Started()
	sub, _, err := app.Manager.Watch(ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	for j, err := app.Manager.Get(ctx, id); err != nil || !j.State.Finished(); {
		ev, open := <-sub.Events()
		if !open {
			r.t.Fatalf("watch of the offline manager ended before job %s finished", id)
		}
		if ev.Job.ID == id {
			j = ev.Job
		}
		err = nil
	}
	cancel()
	if err := <-done; err != nil {
		r.t.Fatal(err)
	}
}

// cliRun is a client command running in the background: its stderr lines
// arrive on a channel as they are written.
type cliRun struct {
	stdout bytes.Buffer
	stderr *lineSink
	all    testutil.SyncBuffer // every stderr line, for failure messages
	done   chan error
}

func startCLI(t *testing.T, addr string, args ...string) *cliRun {
	t.Helper()
	c := &cliRun{stderr: &lineSink{lines: make(chan string, 10_000)}, done: make(chan error, 1)}
	go func() {
		err := run(context.Background(), append([]string{"--addr", addr}, args...), strings.NewReader(""), &c.stdout, c.stderr)
		c.done <- err
	}()
	return c
}

// waitLines waits until n stderr lines containing want have been written,
// or fails when the command ends first.
func (c *cliRun) waitLines(t *testing.T, want string, n int) {
	t.Helper()
	for seen := 0; seen < n; {
		select {
		case l := <-c.stderr.lines:
			fmt.Fprintln(&c.all, l)
			if strings.Contains(l, want) {
				seen++
			}
		case err := <-c.done:
			c.done <- err
			t.Fatalf("the command ended (%v) after %d of %d lines with %q; stderr:\n%s", err, seen, n, want, c.all.String())
		}
	}
}

// wait returns the command's error once it ends, with its whole stderr.
func (c *cliRun) wait() (error, string) {
	err := <-c.done
	for {
		select {
		case l := <-c.stderr.lines:
			fmt.Fprintln(&c.all, l)
		default:
			return err, c.all.String()
		}
	}
}

// TestCompactWaitFollowsJobsThroughARestart: compact --wait keeps
// following the job it was given while the server restarts on the same data
// directory and port, for longer than the old limit of 10 reconnection
// attempts (about 26 s with the default delays), and reports the job's real
// outcome and exit status once the server answers again: a job that
// finished while no server listened, one that ran after the restart, and one
// that a crash interrupted.
func TestCompactWaitFollowsJobsThroughARestart(t *testing.T) {
	for _, tc := range []struct {
		name      string
		meanwhile func(r *restartable, jobID string)
		code      int
		stdout    []string
		stderr    []string
	}{
		{
			name:      "job finished while the server was down",
			meanwhile: func(r *restartable, id string) { r.finishOffline(id) },
			stdout:    []string{"SUCCEEDED", "1 of 1 jobs succeeded", "0 -> 1"},
		},
		{
			name:      "job ran after the restart",
			meanwhile: func(*restartable, string) {},
			stdout:    []string{"SUCCEEDED", "1 of 1 jobs succeeded", "0 -> 1"},
		},
		{
			name: "job interrupted by a crash",
			meanwhile: func(r *restartable, id string) {
				// What a process killed while running the job leaves behind.
				app := r.open()
				j, err := app.Catalog.GetJob(context.Background(), id)
				if err != nil {
					t.Fatal(err)
				}
				j.State, j.StartedAt, j.Node = catalog.JobRunning, time.Now(), "crashed-node"
				if err := app.Catalog.UpdateJob(context.Background(), j); err != nil {
					t.Fatal(err)
				}
				if err := app.Close(); err != nil {
					t.Fatal(err)
				}
			},
			code:   1,
			stdout: []string{"FAILED", "0 of 1 jobs succeeded"},
			// On SQLite every RUNNING job at start belongs to a dead process:
			// the restarted server ends it at once.
			stderr: []string{"did not succeed", "FAILED: interrupted: the process stopped while the job ran"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newRestartable(t)
			_, stop := r.starting()
			id := createCollection(t, r.url(), "restarted")
			ok(t, r.url(), "push", "--collection", id, jsonl(t, `{"id":"x","embedding":[1,2]}`, `{"id":"y","embedding":[3,4]}`))

			c := startCLI(t, r.url(), "compact", id, "--wait", "--reconnect-max-delay", "10ms")
			// The manager has not started: the watch is refused, again and
			// again, more often than the old limit of 10 attempts.
			c.waitLines(t, "reconnecting", 12)
			stop()
			// Nothing listens: connections are refused.
			c.waitLines(t, "reconnecting", 5)
			jobID := r.onlyJob(t, id)
			tc.meanwhile(r, jobID)
			r.serving()

			err, stderr := c.wait()
			if exitCode(err) != tc.code {
				t.Fatalf("exit %d (%v), want %d\nstdout:\n%s\nstderr:\n%s", exitCode(err), err, tc.code, c.stdout.String(), stderr)
			}
			for _, want := range tc.stdout {
				if !strings.Contains(c.stdout.String(), want) {
					t.Errorf("stdout lacks %q:\n%s", want, c.stdout.String())
				}
			}
			for _, want := range tc.stderr {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr)
				}
			}
			if !strings.Contains(c.stdout.String(), jobID) {
				t.Errorf("the summary does not name job %s:\n%s", jobID, c.stdout.String())
			}
		})
	}
}

// TestCompactWaitGivesUpAfterTheReconnectTimeout: a server that never
// answers again ends the wait after --reconnect-timeout, with exit status 1
// and an error that names the job whose outcome is unknown, its last known
// state and the flag.
func TestCompactWaitGivesUpAfterTheReconnectTimeout(t *testing.T) {
	t.Parallel()
	r := newRestartable(t)
	r.starting() // never gets further: the watch stays UNAVAILABLE
	id := createCollection(t, r.url(), "stuck")
	c := startCLI(t, r.url(), "compact", id, "--wait", "--reconnect-timeout", "300ms", "--reconnect-max-delay", "20ms")
	err, stderr := c.wait()
	if exitCode(err) != 1 {
		t.Fatalf("exit %d (%v), want 1\nstderr:\n%s", exitCode(err), err, stderr)
	}
	jobID := r.onlyJob(t, id)
	for _, want := range []string{"server unavailable for", "--reconnect-timeout 300ms", "outcome unknown of 1 job,",
		"job " + jobID + " (collection stuck) QUEUED", "continue on the server"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

// onlyJob returns the id of the one job of a collection, read from the
// catalog of the stopped or running server.
func (r *restartable) onlyJob(t *testing.T, collectionID string) string {
	t.Helper()
	cat, err := catalog.Open(context.Background(), catalog.Config{DSN: r.dir + "/catalog.db"})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	jobs, err := cat.ListJobs(context.Background(), catalog.JobFilter{CollectionID: collectionID})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("jobs of collection %s: %v, %v; want one", collectionID, jobs, err)
	}
	return jobs[0].ID
}
