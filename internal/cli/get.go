package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/structpb"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
)

// maxGetIDs is the most ids one GetRecords call takes (the server's limit).
const maxGetIDs = 10_000

// getOptions are the settings of one get.
type getOptions struct {
	collection string   // id or name
	ids        []string // record ids; none for a paged read
	limit      int
	version    *int64 // a kept version to read alone; nil: the current view
}

func (o *getOptions) validate() error {
	switch {
	case o.collection == "":
		return errors.New("--collection is required")
	case o.limit < 0:
		return fmt.Errorf("--limit must not be negative, got %d", o.limit)
	case o.version != nil && *o.version < 1:
		return fmt.Errorf("--version must be at least 1, got %d", *o.version)
	}
	return nil
}

func newGetCmd(g *globals) *cobra.Command {
	var (
		opts    getOptions
		version int64
	)
	cmd := &cobra.Command{
		Use:   "get --collection COLLECTION [RECORD-ID...] [--limit N] [--version N]",
		Short: "Read records of a collection's materialized view",
		Long: `Read records of a collection (--collection: its id or its name) as readers see
them: the current segment version plus the uncompacted log tail, so the result
is the same before and after any compaction. With record ids, those records
(exit status 1, after printing the others, when some do not exist); without,
the records in id order, following pages up to --limit records (0: every
record).

--version N reads kept segment version N alone (compactor versions lists
them), without the log tail: the records as that version holds them. A
version the collection no longer keeps is an error naming the oldest kept one.

The table shows each record's id, document (truncated), metadata (compact
JSON) and embedding dimension. -o json prints an array of Record objects
({"id", "embedding", "document", "metadata"}).`,
		RunE: clientRun(g, func(cmd *cobra.Command, ids []string) error {
			opts.ids = ids
			opts.version = versionFlag(cmd, version)
			return opts.validate()
		}, func(ctx context.Context, s *session, _ []string) error { return s.get(ctx, opts) }),
	}
	cmd.Flags().StringVar(&opts.collection, "collection", "", "id or name of the collection (required)")
	cmd.Flags().IntVar(&opts.limit, "limit", 100, "most records of a paged read (0: all); ignored with record ids")
	cmd.Flags().Int64Var(&version, "version", 0, "read this kept segment version alone, without the log tail")
	_ = cmd.RegisterFlagCompletionFunc("version", cobra.NoFileCompletions)
	_ = cmd.RegisterFlagCompletionFunc("collection", completeCollections(g, -1))
	return cmd
}

func (s *session) get(ctx context.Context, opts getOptions) error {
	id, err := s.resolveCollection(ctx, opts.collection)
	if err != nil {
		return err
	}
	var recs []*compactorv1.Record
	if len(opts.ids) > 0 {
		recs, err = s.getByIDs(ctx, id, opts.ids, opts.version)
	} else {
		recs, err = s.getPaged(ctx, id, opts.limit, opts.version)
	}
	if err != nil {
		return err
	}
	if err := s.printRecords(recs); err != nil {
		return err
	}
	if len(opts.ids) > 0 {
		return missingRecords(opts.ids, recs)
	}
	return nil
}

// versionFlag is the value of cmd's --version flag when given; nil when not.
func versionFlag(cmd *cobra.Command, v int64) *int64 {
	if !cmd.Flags().Changed("version") {
		return nil
	}
	return &v
}

// getByIDs reads records by id, of the current view or of version (nil:
// the current view).
func (s *session) getByIDs(ctx context.Context, collection string, ids []string, version *int64) ([]*compactorv1.Record, error) {
	var recs []*compactorv1.Record
	for start := 0; start < len(ids); start += maxGetIDs {
		chunk := ids[start:min(start+maxGetIDs, len(ids))]
		res, err := unary(ctx, s, s.c.collection.GetRecords, &compactorv1.GetRecordsRequest{CollectionId: collection, Ids: chunk, Version: version})
		if err != nil {
			return nil, err
		}
		recs = append(recs, res.GetRecords()...)
	}
	return recs, nil
}

// getPaged reads the records in id order, up to limit (0: all), of the
// current view or of version (nil: the current view).
func (s *session) getPaged(ctx context.Context, collection string, limit int, version *int64) ([]*compactorv1.Record, error) {
	return collect(ctx, limit, func(ctx context.Context, size int32, token string) ([]*compactorv1.Record, string, error) {
		res, err := unary(ctx, s, s.c.collection.GetRecords, &compactorv1.GetRecordsRequest{CollectionId: collection, Version: version, PageSize: size, PageToken: token})
		return res.GetRecords(), res.GetNextPageToken(), err
	})
}

// missingRecords is a not_found error naming the ids without a record, or
// nil.
func missingRecords(ids []string, recs []*compactorv1.Record) error {
	found := make(map[string]bool, len(recs))
	for _, r := range recs {
		found[r.GetId()] = true
	}
	var missing []string
	for _, id := range ids {
		if !found[id] {
			found[id] = true // report duplicates once
			missing = append(missing, fmt.Sprintf("%q", id))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("not_found: %d of the requested records do not exist: %s", len(missing), ellipsize(strings.Join(missing, ", "), 300))
}

func (s *session) printRecords(recs []*compactorv1.Record) error {
	return showList(s, recs, "no records", func() error {
		tw := s.out.table()
		fmt.Fprintln(tw, "ID\tDOCUMENT\tMETADATA\tDIMS")
		for _, r := range recs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", safeText(ellipsize(r.GetId(), 40)), documentText(r.Document), metadataText(r.GetMetadata(), 80), len(r.GetEmbedding()))
		}
		return tw.Flush()
	})
}

// documentText is a record's document for a table cell, at most 48 runes;
// "-" when it has none.
func documentText(doc *string) string {
	if doc == nil {
		return "-"
	}
	return safeText(ellipsize(*doc, 48))
}

// metadataText is a record's metadata for a table cell, as compact JSON of
// at most n runes (encoding/json sorts the keys: the same record prints the
// same); "-" when it has none.
func metadataText(md *structpb.Struct, n int) string {
	if md == nil {
		return "-"
	}
	b, err := json.Marshal(md.AsMap())
	if err != nil {
		return "-"
	}
	return safeText(ellipsize(string(b), n))
}
