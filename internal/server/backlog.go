package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/manager"
	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/storetrace"
)

// pushNotifier is the catalog as the API sees it, with one addition: after
// every accepted push it has the manager re-read the collection's backlog,
// so that compactor_uncompacted_records follows pushes at once instead of at
// the next scheduler run.
type pushNotifier struct {
	storetrace.Catalog
	mgr *manager.Manager
	log *slog.Logger
}

func (p pushNotifier) AppendLogKeyed(ctx context.Context, collectionID, key string, ops []materialize.OperationRecord, lim catalog.AppendLimits) (int64, int64, bool, error) {
	first, last, replayed, err := p.Catalog.AppendLogKeyed(ctx, collectionID, key, ops, lim)
	if err == nil && !replayed {
		// The push is in; a failed read only leaves the gauge behind
		// until the next job end or scheduler run.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if rerr := p.mgr.RefreshBacklog(rctx, collectionID); rerr != nil {
			p.log.Warn("read backlog after push", "collection", collectionID, "err", rerr)
		}
	}
	return first, last, replayed, err
}
