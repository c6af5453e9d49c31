package rpc_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"
	_ "modernc.org/sqlite"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/gen/compactor/v1/compactorv1connect"
	"github.com/compactorhq/compactor/internal/auth"
	"github.com/compactorhq/compactor/internal/rpc"
	"github.com/compactorhq/compactor/internal/server"
)

// apiMethods returns every method of every service of the API's generated
// descriptors (package compactor.v1, whatever file declares it), by
// procedure.
func apiMethods(t *testing.T) map[string]protoreflect.MethodDescriptor {
	t.Helper()
	// Linked in: every file of the package registers itself.
	_ = compactorv1.File_compactor_v1_audit_proto
	out := map[string]protoreflect.MethodDescriptor{}
	protoregistry.GlobalFiles.RangeFilesByPackage("compactor.v1", func(fd protoreflect.FileDescriptor) bool {
		for i := range fd.Services().Len() {
			svc := fd.Services().Get(i)
			for j := range svc.Methods().Len() {
				md := svc.Methods().Get(j)
				out["/"+string(svc.FullName())+"/"+string(md.Name())] = md
			}
		}
		return true
	})
	if len(out) < 20 {
		t.Fatalf("only %d procedures found in the descriptors", len(out))
	}
	return out
}

// TestProcedureRolesCoverEveryProcedure: every procedure of the generated
// service descriptors has a role (a new RPC without one fails here), no
// entry names a procedure that does not exist, and no procedure that
// changes state is open to readers.
func TestProcedureRolesCoverEveryProcedure(t *testing.T) {
	methods := apiMethods(t)
	for proc := range methods {
		role, ok := rpc.ProcedureRoles[proc]
		if !ok {
			t.Errorf("procedure %s has no role in rpc.ProcedureRoles", proc)
			continue
		}
		if !role.Valid() {
			t.Errorf("procedure %s: unknown role %q", proc, role)
		}
	}
	for proc := range rpc.ProcedureRoles {
		if _, ok := methods[proc]; !ok && !strings.HasPrefix(proc, "/grpc.reflection.") {
			t.Errorf("rpc.ProcedureRoles names %s, which the API does not have", proc)
		}
	}
	for _, proc := range rpc.MutatingProcedures() {
		if rpc.ProcedureRoles[proc] == auth.RoleReader {
			t.Errorf("%s changes state but is open to readers", proc)
		}
	}
}

func tokenSum(tok string) string {
	s := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(s[:])
}

// roleFixture serves with a tokens file holding one credential per role,
// named after it, whose token is "<role>-token".
func roleFixture(t *testing.T, configure func(*server.Config)) (*fixture, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	var b strings.Builder
	for _, r := range auth.Roles {
		fmt.Fprintf(&b, "%s-1 %s %s\n", r, r, tokenSum(string(r)+"-token"))
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, fixtureOptions{configure: func(cfg *server.Config) {
		cfg.TokensFile = path
		if configure != nil {
			configure(cfg)
		}
	}})
	return f, path
}

// callRaw calls procedure with an empty request (every field at its
// default) and returns the call's error: the role check runs before the
// request is decoded, and an empty message is a valid request of every
// procedure (answered, if allowed, by the handler, e.g. INVALID_ARGUMENT).
func callRaw(t *testing.T, f *fixture, p protocol, procedure string, md protoreflect.MethodDescriptor, token string) error {
	t.Helper()
	opts := slices.Clone(p.opts)
	if token != "" {
		opts = append(opts, withBearer(token))
	}
	c := connect.NewClient[emptypb.Empty, emptypb.Empty](f.srv.Client(), f.srv.URL+procedure, opts...)
	if md.IsStreamingServer() {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		stream, err := c.CallServerStream(ctx, connect.NewRequest(&emptypb.Empty{}))
		if err != nil {
			return err
		}
		defer stream.Close()
		if stream.Receive() {
			return nil // the first message: allowed
		}
		return stream.Err()
	}
	_, err := c.CallUnary(t.Context(), connect.NewRequest(&emptypb.Empty{}))
	return err
}

// TestEachRoleIsRefusedAboveIt calls every procedure of the API with each
// role's token, with none and with a wrong one: a role below the
// procedure's is PERMISSION_DENIED naming the role needed and the
// principal, a role that allows it reaches the handler, no token is
// UNAUTHENTICATED except for reader procedures, a wrong token always is.
func TestEachRoleIsRefusedAboveIt(t *testing.T) {
	t.Parallel()
	f, _ := roleFixture(t, nil)
	methods := apiMethods(t)
	procs := make([]string, 0, len(methods))
	for proc := range methods {
		procs = append(procs, proc)
	}
	slices.Sort(procs)
	for _, p := range protocols {
		if p.json {
			continue // an empty request is sent as binary protobuf
		}
		t.Run(p.name, func(t *testing.T) {
			for _, proc := range procs {
				need := rpc.ProcedureRoles[proc]
				for _, r := range auth.Roles {
					err := callRaw(t, f, p, proc, methods[proc], string(r)+"-token")
					code := connect.CodeOf(err)
					if r.Allows(need) {
						if err != nil && (code == connect.CodePermissionDenied || code == connect.CodeUnauthenticated) {
							t.Errorf("%s as %s (needs %s): %v", proc, r, need, err)
						}
						continue
					}
					if code != connect.CodePermissionDenied {
						t.Errorf("%s as %s (needs %s): %v, want PERMISSION_DENIED", proc, r, need, err)
						continue
					}
					if msg := err.Error(); !strings.Contains(msg, "needs role "+string(need)) || !strings.Contains(msg, string(r)+"-1 has role "+string(r)) {
						t.Errorf("%s as %s: message %q does not name the role needed and the principal's", proc, r, msg)
					}
				}
				err := callRaw(t, f, p, proc, methods[proc], "")
				if need == auth.RoleReader {
					if c := connect.CodeOf(err); err != nil && (c == connect.CodePermissionDenied || c == connect.CodeUnauthenticated) {
						t.Errorf("%s without a token: %v (reads are open without --protect-reads)", proc, err)
					}
				} else if connect.CodeOf(err) != connect.CodeUnauthenticated {
					t.Errorf("%s without a token: %v, want UNAUTHENTICATED", proc, err)
				}
				if err := callRaw(t, f, p, proc, methods[proc], "not-a-token"); connect.CodeOf(err) != connect.CodeUnauthenticated {
					t.Errorf("%s with a wrong token: %v, want UNAUTHENTICATED", proc, err)
				}
			}
		})
	}
	if n := requestsCounted(t, f, compactorv1connect.CollectionServiceDeleteCollectionProcedure, "permission_denied"); n == 0 {
		t.Error("refusals of DeleteCollection are not counted as permission_denied")
	}
	for _, r := range auth.Roles {
		if strings.Contains(f.logs.String(), string(r)+"-token") {
			t.Errorf("the server log shows the token of %s", r)
		}
	}
}

// TestAuditLogOverRPC: the operator actions of several principals are
// listed with the principal, the role, the address they came from, the
// action and the job; a job shows who triggered it; the chain verifies
// until a row is edited in the database, and then VerifyAuditLog names the
// event; readers may not read the audit log.
func TestAuditLogOverRPC(t *testing.T) {
	t.Parallel()
	f, _ := roleFixture(t, nil)
	p := protocols[0]
	admin, op, reader := f.clients(p, withBearer("admin-token")), f.clients(p, withBearer("operator-token")), f.clients(p, withBearer("reader-token"))
	coll := createCollection(t, admin, "audited", 2)
	push(t, admin, coll.GetId(), smallRecords(0, 3, 2))
	res, err := op.jobs.Compact(t.Context(), connect.NewRequest(&compactorv1.CompactRequest{CollectionIds: []string{coll.GetId()}, Reason: "after the load"}))
	if err != nil {
		t.Fatal(err)
	}
	job := res.Msg.GetJobs()[0].GetJob()
	if job.GetTriggeredBy() != "operator-1" {
		t.Errorf("the job's triggered_by is %q, want operator-1", job.GetTriggeredBy())
	}
	if got := waitJob(t, op, job.GetId()); got.GetTriggeredBy() != "operator-1" {
		t.Errorf("the finished job's triggered_by is %q", got.GetTriggeredBy())
	}
	if _, err := op.ctl.PauseCompactions(t.Context(), connect.NewRequest(&compactorv1.PauseCompactionsRequest{CollectionId: coll.GetId(), Reason: "maintenance"})); err != nil {
		t.Fatal(err)
	}
	if got := getCollection(t, op, coll.GetId()); got.GetPausedBy() != "operator-1" {
		t.Errorf("paused_by %q, want the principal", got.GetPausedBy())
	}
	if _, err := admin.colls.DeleteCollection(t.Context(), connect.NewRequest(&compactorv1.DeleteCollectionRequest{Id: coll.GetId()})); err != nil {
		t.Fatal(err)
	}

	_, err = reader.audit.ListAuditEvents(t.Context(), connect.NewRequest(&compactorv1.ListAuditEventsRequest{}))
	wantCode(t, err, connect.CodePermissionDenied)

	list, err := op.audit.ListAuditEvents(t.Context(), connect.NewRequest(&compactorv1.ListAuditEventsRequest{CollectionId: coll.GetId(), PageSize: 2}))
	if err != nil {
		t.Fatal(err)
	}
	events := list.Msg.GetEvents()
	for tok := list.Msg.GetNextPageToken(); tok != ""; {
		more, err := op.audit.ListAuditEvents(t.Context(), connect.NewRequest(&compactorv1.ListAuditEventsRequest{CollectionId: coll.GetId(), PageSize: 2, PageToken: tok}))
		if err != nil {
			t.Fatal(err)
		}
		events, tok = append(events, more.Msg.GetEvents()...), more.Msg.GetNextPageToken()
	}
	want := []struct{ principal, role, action, job string }{
		{"admin-1", "admin", "collection.create", ""},
		{"operator-1", "operator", "compact", job.GetId()},
		{"operator-1", "operator", "pause", ""},
		{"admin-1", "admin", "collection.delete", ""},
	}
	if len(events) != len(want) {
		t.Fatalf("%d events, want %d: %v", len(events), len(want), events)
	}
	for i, w := range want {
		e := events[i]
		if e.GetPrincipal() != w.principal || e.GetRole() != w.role || e.GetAction() != w.action || e.GetJobId() != w.job || e.GetSource() == "" || e.GetHash() == "" {
			t.Errorf("event %d: %v, want %+v", i, e, w)
		}
	}
	if events[1].GetReason() != "after the load" || events[2].GetReason() != "maintenance" {
		t.Errorf("reasons: %q, %q", events[1].GetReason(), events[2].GetReason())
	}
	since, err := op.audit.ListAuditEvents(t.Context(), connect.NewRequest(&compactorv1.ListAuditEventsRequest{Since: timestamppb.New(time.Now().Add(time.Hour))}))
	if err != nil || len(since.Msg.GetEvents()) != 0 {
		t.Errorf("events since an hour from now: %v, %v", since, err)
	}

	v, err := op.audit.VerifyAuditLog(t.Context(), connect.NewRequest(&compactorv1.VerifyAuditLogRequest{}))
	if err != nil || !v.Msg.GetOk() || v.Msg.GetEventsChecked() != 4 || v.Msg.GetLastHash() != events[3].GetHash() {
		t.Fatalf("verify: %v, %v", v, err)
	}

	db, err := sql.Open("sqlite", filepath.Join(f.cfg.DataDir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(t.Context(), `UPDATE audit_events SET principal = 'someone-else' WHERE id = ?`, events[2].GetId()); err != nil {
		t.Fatal(err)
	}
	v, err = op.audit.VerifyAuditLog(t.Context(), connect.NewRequest(&compactorv1.VerifyAuditLogRequest{}))
	if err != nil || v.Msg.GetOk() || v.Msg.GetBrokenEventId() != events[2].GetId() || !strings.Contains(v.Msg.GetProblem(), "edited") {
		t.Fatalf("verify after an edit: %v, %v", v, err)
	}
}

// TestAnonymousWithoutCredentials: a server without credentials records
// its actions and jobs as "anonymous" with role admin.
func TestAnonymousWithoutCredentials(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{idle: true})
	c := f.clients(protocols[1])
	coll := createCollection(t, c, "anon", 2)
	if got := compactOne(t, c, coll.GetId()); got.GetJob().GetTriggeredBy() != auth.Anonymous {
		t.Errorf("triggered_by %q, want anonymous", got.GetJob().GetTriggeredBy())
	}
	list, err := c.audit.ListAuditEvents(t.Context(), connect.NewRequest(&compactorv1.ListAuditEventsRequest{}))
	if err != nil || len(list.Msg.GetEvents()) != 2 {
		t.Fatalf("events: %v, %v", list, err)
	}
	for _, e := range list.Msg.GetEvents() {
		if e.GetPrincipal() != auth.Anonymous || e.GetRole() != "admin" {
			t.Errorf("event %v", e)
		}
	}
}

// requestsCounted reads compactor_rpc_requests_total of procedure and code.
func requestsCounted(t *testing.T, f *fixture, procedure, code string) float64 {
	t.Helper()
	mfs, err := f.app.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "compactor_rpc_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["procedure"] == procedure && labels["code"] == code {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
