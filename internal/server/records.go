package server

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/compaction"
	"github.com/compactorhq/compactor/internal/manager"
	"github.com/compactorhq/compactor/internal/rpc"
)

// records is the read path of the API (the compactor's), rollbacks, and
// collection deletion (the manager's use case).
type records struct {
	*compaction.Compactor
	del *manager.Deleter
	mgr *manager.Manager // names this node on rollbacks and publishes their jobs
	log *slog.Logger
}

var _ rpc.Records = records{}

// Rollback names this node on the rollback's job, and publishes the job
// (recorded SUCCEEDED by the rollback's transaction) to the watchers, as
// the manager publishes the end of every job it runs. The rollback has
// taken effect whether or not that publication works: its failure is
// logged, not returned.
func (r records) Rollback(ctx context.Context, collectionID string, req compaction.RollbackRequest) (compaction.RollbackResult, error) {
	req.Node = r.mgr.Node()
	res, err := r.Compactor.Rollback(ctx, collectionID, req)
	if err != nil {
		return res, err
	}
	if _, err := r.mgr.Recorded(context.WithoutCancel(ctx), res.JobID); err != nil {
		r.log.Warn("publish rollback job", "job", res.JobID, "collection", collectionID, "err", err)
	}
	return res, nil
}

// DeleteCollection is the manager's use case.
func (r records) DeleteCollection(ctx context.Context, collectionID string) (catalog.Collection, error) {
	return r.del.DeleteCollection(ctx, collectionID)
}

// collectionStorage is what a collection stores, as manager.Deleter deletes
// it. On a file:// blob store, deleting a collection also removes the
// directories its blobs leave (collections/<id>/blocks, manifests and the
// collection's own): a blob store deletes blobs, and on a file system the
// empty directories would stay behind.
type collectionStorage struct {
	c       *compaction.Compactor
	blobDir string // root directory of a file:// blob store; "" for other stores
	log     *slog.Logger
}

var _ manager.CollectionStorage = collectionStorage{}

// fileBlobDir returns the directory of a file:// blob URL ("" for other
// schemes), as gocloud.dev's fileblob reads it: the path, and with the
// host "." a path relative to the working directory.
func fileBlobDir(blobURL string) string {
	u, err := url.Parse(blobURL)
	if err != nil || u.Scheme != "file" {
		return ""
	}
	p := u.Path
	if u.Host == "." || os.PathSeparator != '/' {
		p = strings.TrimPrefix(p, "/")
	}
	return filepath.FromSlash(p)
}

// DeleteCollection deletes the collection (catalog row, log, jobs, blobs),
// then the empty directories under its blob prefix. A directory that is
// not empty stays (nothing else is deleted); failing to remove one is
// logged, not returned: the collection is gone either way.
func (r collectionStorage) DeleteCollection(ctx context.Context, collectionID string) (catalog.Collection, error) {
	c, err := r.c.DeleteCollection(ctx, collectionID)
	if err != nil || r.blobDir == "" || collectionID == "" || strings.ContainsAny(collectionID, `/\.`) {
		return c, err
	}
	root := filepath.Join(r.blobDir, "collections", collectionID)
	var dirs []string
	werr := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	if werr != nil && !errors.Is(werr, fs.ErrNotExist) {
		r.log.Warn("list directories of deleted collection", "collection", collectionID, "err", werr)
	}
	slices.Reverse(dirs) // children before their parent
	for _, d := range dirs {
		if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			r.log.Warn("remove directory of deleted collection", "collection", collectionID, "dir", d, "err", err)
		}
	}
	return c, nil
}
