package manager

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/compactorhq/compactor/internal/catalog"
)

// CollectionStorage removes what a collection stores: its catalog rows (the
// collection, its log and jobs) and its blobs. The binary wires the
// compaction's DeleteCollection (plus its file-system cleanup).
type CollectionStorage interface {
	// DeleteCollection returns the collection as it was; ErrNotFound when
	// it does not exist.
	DeleteCollection(ctx context.Context, collectionID string) (catalog.Collection, error)
}

// Deleter is the use case "delete a collection", written once for every
// surface (RPC, page, CLI through the RPC): the order of the steps across
// the manager and storage is a rule of the domain, not of an adapter.
type Deleter struct {
	m       *Manager
	storage CollectionStorage
}

// NewDeleter returns the Deleter of collections managed by m and stored in
// storage.
func NewDeleter(m *Manager, storage CollectionStorage) *Deleter {
	return &Deleter{m: m, storage: storage}
}

// DeleteCollection deletes a collection: an unknown one is ErrNotFound
// before anything is done; its active jobs are cancelled first (they end
// CANCELLED "collection deleted"; a failure to cancel is logged, and the
// deletion goes on: a job whose collection is gone cannot commit); then its
// storage is deleted and its backlog gauges dropped. It returns the
// collection as it was. Errors: ErrNotFound, the storage's.
func (d *Deleter) DeleteCollection(ctx context.Context, collectionID string) (catalog.Collection, error) {
	if _, err := d.m.store.GetCollection(ctx, collectionID); err != nil {
		return catalog.Collection{}, fmt.Errorf("delete collection %s: %w", collectionID, err)
	}
	if err := d.cancelJobs(ctx, collectionID); err != nil {
		d.m.logger.WarnContext(ctx, "cancel jobs of deleted collection", "collection", collectionID, "err", err)
	}
	c, err := d.storage.DeleteCollection(ctx, collectionID)
	if err != nil {
		return c, err // the storage's error names the collection
	}
	// Every other state of the collection (retry state, pauses,
	// settings) is a column of its row, deleted with it.
	d.m.metrics.backlogs.drop(collectionID)
	return c, nil
}

// cancelJobs cancels the active jobs of a collection that is about to be
// deleted: they end CANCELLED with the note "collection deleted" (not
// "cancelled by operator"). It waits for this node's running job to stop,
// until ctx ends; another replica's stops when its lease renewal finds the
// job cancelled or gone. Errors: those of Cancel other than ErrFinished (a
// job that finished meanwhile needs no cancelling), joined.
func (d *Deleter) cancelJobs(ctx context.Context, collectionID string) error {
	active, err := d.m.Active(ctx)
	if err != nil {
		return err
	}
	// The queued job first: cancelled after the running one, it could be
	// claimed as soon as that one ended.
	slices.SortStableFunc(active, func(a, b Job) int {
		return cmp.Compare(boolGauge(a.State == catalog.JobRunning), boolGauge(b.State == catalog.JobRunning))
	})
	var errs []error
	for _, j := range active {
		if j.CollectionID != collectionID {
			continue
		}
		if _, err := d.m.cancel(ctx, j.ID, NoteCollectionDeleted); err != nil && !errors.Is(err, ErrFinished) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
