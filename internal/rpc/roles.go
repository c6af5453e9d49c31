package rpc

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	"github.com/compactorhq/compactor/gen/compactor/v1/compactorv1connect"
	"github.com/compactorhq/compactor/internal/audit"
	"github.com/compactorhq/compactor/internal/auth"
)

// ProcedureRoles is the minimum role of every procedure the server mounts
// (the API's services and gRPC reflection; grpc.health.v1 needs none): one
// table, so that a role is decided in one place. A test fails when a
// procedure of the generated service descriptors has no entry, so a new RPC
// cannot be served unmapped. The roles are the (package auth):
// reader reads, writer pushes and creates collections, operator runs
// compactions and controls, admin deletes and changes settings.
// docs/operations.md lists the same table.
var ProcedureRoles = map[string]auth.Role{
	compactorv1connect.CompactionServiceCompactProcedure:          auth.RoleOperator,
	compactorv1connect.CompactionServiceGetCompactionProcedure:    auth.RoleReader,
	compactorv1connect.CompactionServiceListCompactionsProcedure:  auth.RoleReader,
	compactorv1connect.CompactionServiceWatchCompactionsProcedure: auth.RoleReader,
	compactorv1connect.CompactionServiceCancelCompactionProcedure: auth.RoleOperator,
	compactorv1connect.CompactionServiceListNodesProcedure:        auth.RoleReader,
	compactorv1connect.CompactionServiceRebuildIndexProcedure:     auth.RoleOperator,
	compactorv1connect.CompactionServiceVerifyCollectionProcedure: auth.RoleOperator,

	compactorv1connect.CollectionServiceCreateCollectionProcedure:   auth.RoleWriter,
	compactorv1connect.CollectionServiceGetCollectionProcedure:      auth.RoleReader,
	compactorv1connect.CollectionServiceListCollectionsProcedure:    auth.RoleReader,
	compactorv1connect.CollectionServiceDeleteCollectionProcedure:   auth.RoleAdmin,
	compactorv1connect.CollectionServiceGetRecordsProcedure:         auth.RoleReader,
	compactorv1connect.CollectionServiceQueryRecordsProcedure:       auth.RoleReader,
	compactorv1connect.CollectionServiceListVersionsProcedure:       auth.RoleReader,
	compactorv1connect.CollectionServiceRollbackCollectionProcedure: auth.RoleAdmin,

	compactorv1connect.LogServicePushLogsProcedure: auth.RoleWriter,

	compactorv1connect.ControlServicePauseCompactionsProcedure:         auth.RoleOperator,
	compactorv1connect.ControlServiceResumeCompactionsProcedure:        auth.RoleOperator,
	compactorv1connect.ControlServiceSetThroughputProcedure:            auth.RoleOperator,
	compactorv1connect.ControlServiceGetControlsProcedure:              auth.RoleReader,
	compactorv1connect.ControlServicePlanCompactionsProcedure:          auth.RoleReader,
	compactorv1connect.ControlServiceUpdateCollectionSettingsProcedure: auth.RoleAdmin,
	compactorv1connect.ControlServiceSetCollectionPolicyProcedure:      auth.RoleAdmin,
	compactorv1connect.ControlServiceClearDeadLetterProcedure:          auth.RoleAdmin,
	compactorv1connect.ControlServiceGetDeadLetterHistoryProcedure:     auth.RoleReader,

	// The audit log names principals and the addresses they came from:
	// operators and admins read it, not every reader.
	compactorv1connect.AuditServiceListAuditEventsProcedure: auth.RoleOperator,
	compactorv1connect.AuditServiceVerifyAuditLogProcedure:  auth.RoleOperator,

	// Reflection describes the API: a read.
	"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo":      auth.RoleReader,
	"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo": auth.RoleReader,
}

// authorizer is the HTTP middleware in front of every service: it resolves
// the request's principal (auth.Authenticator), refuses a request without a
// valid token where one is needed (UNAUTHENTICATED) and one whose role is
// below the procedure's (PERMISSION_DENIED, naming the role needed), and
// hands the principal on in the request's context as an audit.Actor (with
// the peer address) and an auth.Principal. Without credentials every
// request is "anonymous" with role admin. The token never appears in errors
// or logs.
type authorizer struct {
	authn        *auth.Authenticator
	protectReads bool
	errors       *connect.ErrorWriter
}

func newAuthorizer(a *auth.Authenticator, protectReads bool) *authorizer {
	if a == nil {
		a = auth.NewAuthenticator(nil)
	}
	return &authorizer{authn: a, protectReads: protectReads, errors: connect.NewErrorWriter()}
}

func (z *authorizer) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := z.check(r)
		if err != nil {
			if st := stateOf(r.Context()); st != nil {
				st.authErr = err
			}
			_ = z.errors.Write(w, r, err)
			return
		}
		ctx := auth.WithPrincipal(r.Context(), p)
		ctx = audit.WithActor(ctx, audit.Actor{Name: p.Name, Role: string(p.Role), Source: r.RemoteAddr})
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// check returns the principal of r, or the Connect error that refuses it.
func (z *authorizer) check(r *http.Request) (auth.Principal, error) {
	procedure := r.URL.Path
	need, known := ProcedureRoles[procedure]
	if !known {
		// Not a procedure of the API (connect answers 404); the most a
		// role may need, so that nothing unmapped is served openly.
		need = auth.RoleAdmin
	}
	p, err := z.authn.Authenticate(r.Header)
	switch {
	case errors.Is(err, auth.ErrMissing):
		if need == auth.RoleReader && !z.protectReads {
			return p, nil // reads are open without --protect-reads
		}
		return auth.Principal{}, connect.NewError(connect.CodeUnauthenticated, err)
	case err != nil:
		return auth.Principal{}, connect.NewError(connect.CodeUnauthenticated, err)
	}
	if err := auth.Authorize(p, need, procedureName(procedure)); err != nil {
		return auth.Principal{}, connect.NewError(connect.CodePermissionDenied, err)
	}
	return p, nil
}

// procedureName is a procedure's path without its leading slash
// ("compactor.v1.CollectionService/DeleteCollection").
func procedureName(path string) string { return strings.TrimPrefix(path, "/") }

// whoAsks is the "by" kept with a pause or a throughput cap: the
// principal's name, followed by the text the request gave ("operator"),
// when it gave one that differs; that text alone for an anonymous
// principal. At most MaxReasonBytes.
func whoAsks(ctx context.Context, given string) string {
	given = strings.TrimSpace(given)
	p, ok := auth.PrincipalFrom(ctx)
	if !ok || (p.Name == auth.Anonymous && given != "") || given == p.Name {
		return given
	}
	if given == "" {
		return p.Name
	}
	by := p.Name + " (" + given + ")"
	if len(by) > MaxReasonBytes {
		by = strings.ToValidUTF8(by[:MaxReasonBytes-len("…)")], "") + "…)"
	}
	return by
}
