package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/structpb"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
)

// queryOptions are the settings of one query.
type queryOptions struct {
	collection string
	embedding  string // JSON array of numbers
	like       string // record id
	k          int
	where      string // JSON object
	ef         int
	exact      bool
	embeddings bool   // include the embeddings
	version    *int64 // a kept version to query alone; nil: the current view
}

// maxQueryK is the server's bound of k.
const maxQueryK = 1000

func (o *queryOptions) validate() error {
	switch {
	case (o.embedding == "") == (o.like == ""):
		return errors.New("give --embedding JSON or --like RECORD_ID (one of them)")
	case o.k < 1 || o.k > maxQueryK:
		return fmt.Errorf("-k must be in 1..%d, got %d", maxQueryK, o.k)
	case o.ef < 0:
		return fmt.Errorf("--ef must not be negative, got %d", o.ef)
	case o.version != nil && *o.version < 1:
		return fmt.Errorf("--version must be at least 1, got %d", *o.version)
	}
	return nil
}

// request validates the options and builds the request, but for its
// collection and, with --like, its embedding.
func (o *queryOptions) request() (*compactorv1.QueryRecordsRequest, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	req := &compactorv1.QueryRecordsRequest{K: int32(o.k), Ef: int32(o.ef), Exact: o.exact, Version: o.version}
	if o.embedding != "" {
		v, err := parseEmbedding(o.embedding)
		if err != nil {
			return nil, err
		}
		req.Embeddings = []*compactorv1.QueryEmbedding{{Values: v}}
	}
	w, err := parseWhere(o.where)
	if err != nil {
		return nil, err
	}
	req.Where = w
	req.Include = []compactorv1.Include{compactorv1.Include_INCLUDE_DISTANCES, compactorv1.Include_INCLUDE_DOCUMENTS, compactorv1.Include_INCLUDE_METADATA}
	if o.embeddings {
		req.Include = append(req.Include, compactorv1.Include_INCLUDE_EMBEDDINGS)
	}
	return req, nil
}

// parseEmbedding reads a JSON array of numbers.
func parseEmbedding(s string) ([]float32, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	var v []float32
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("--embedding is not a JSON array of numbers: %v", err)
	}
	if dec.More() {
		return nil, errors.New("--embedding has data after the JSON array")
	}
	if len(v) == 0 {
		return nil, errors.New("--embedding is an empty array")
	}
	return v, nil
}

// parseWhere reads a JSON object as a Struct; the server checks the
// filter and names the part that is wrong.
func parseWhere(s string) (*structpb.Struct, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("--where is not a JSON object: %v", err)
	}
	if dec.More() {
		return nil, errors.New("--where has data after the JSON object")
	}
	st, err := structpb.NewStruct(m)
	if err != nil {
		return nil, fmt.Errorf("--where: %v", err)
	}
	return st, nil
}

func newQueryCmd(g *globals) *cobra.Command {
	var (
		opts    queryOptions
		version int64
		req     *compactorv1.QueryRecordsRequest
	)
	cmd := &cobra.Command{
		Use:   "query COLLECTION (--embedding JSON | --like RECORD_ID) [-k 10] [--where JSON] [--exact] [--ef N] [--embeddings] [--version N]",
		Short: "Find the records nearest to an embedding",
		Long: `Find the -k records of a collection (its id or its name) nearest to a query
embedding by the collection's distance (l2, cosine or ip, fixed at creation),
nearest first, ties by id. The query sees every record pushed before it, the
uncompacted log tail included.

--embedding takes the query vector as a JSON array ("[0.1, 0.2, ...]", of the
collection's dimension); --like RECORD_ID uses that record's embedding (the
record itself is then first, at distance 0).

--where filters on metadata with Chroma's syntax:
  '{"section": "games"}'                 equal
  '{"size": {"$gt": 100}}'               $eq $ne $gt $gte $lt $lte $in $nin
  '{"$and": [{...}, {...}]}'             also $or
A record without the key matches neither $eq, $in nor a comparison, and
matches $ne and $nin.

--exact scans the matching records instead of using the vector index: exact
results at a cost that grows with the collection.

--version N queries kept segment version N alone (its index and blocks,
without the log tail; --like then takes the record as that version holds it).

The table shows each result's rank, id, distance, document (truncated) and
metadata (compact JSON). -o json prints an array of results: {"id",
"distance", "document", "metadata"} (and "embedding" with --embeddings).`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeCollections(g, 1),
		RunE: clientRun(g, func(cmd *cobra.Command, args []string) error {
			opts.collection = args[0]
			opts.version = versionFlag(cmd, version)
			var err error
			req, err = opts.request()
			return err
		}, func(ctx context.Context, s *session, _ []string) error { return s.query(ctx, opts, req) }),
	}
	f := cmd.Flags()
	f.StringVar(&opts.embedding, "embedding", "", "the query embedding, a JSON array of numbers")
	f.StringVar(&opts.like, "like", "", "use the embedding of this record as the query")
	f.IntVarP(&opts.k, "k", "k", 10, fmt.Sprintf("results to return, 1..%d", maxQueryK))
	f.StringVar(&opts.where, "where", "", `metadata filter, a JSON object in Chroma's where syntax`)
	f.IntVar(&opts.ef, "ef", 0, "candidate list size of an index search (0: the collection's ef_search)")
	f.BoolVar(&opts.exact, "exact", false, "scan instead of using the vector index (exact results)")
	f.BoolVar(&opts.embeddings, "embeddings", false, "include the embeddings in the output")
	f.Int64Var(&version, "version", 0, "query this kept segment version alone, without the log tail")
	for _, name := range []string{"embedding", "like", "k", "where", "ef", "version"} {
		_ = cmd.RegisterFlagCompletionFunc(name, cobra.NoFileCompletions)
	}
	return cmd
}

func (s *session) query(ctx context.Context, opts queryOptions, req *compactorv1.QueryRecordsRequest) error {
	id, err := s.resolveCollection(ctx, opts.collection)
	if err != nil {
		return err
	}
	req.CollectionId = id
	if opts.like != "" {
		recs, err := s.getByIDs(ctx, id, []string{opts.like}, opts.version)
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			return fmt.Errorf("not_found: record %q does not exist (--like)", opts.like)
		}
		req.Embeddings = []*compactorv1.QueryEmbedding{{Values: recs[0].GetEmbedding()}}
	}
	res, err := unary(ctx, s, s.c.collection.QueryRecords, req)
	if err != nil {
		return err
	}
	var hits []*compactorv1.QueryHit
	if rs := res.GetResults(); len(rs) > 0 {
		hits = rs[0].GetHits()
	}
	return showList(s, hits, "no records", func() error {
		tw := s.out.table()
		fmt.Fprintln(tw, "#\tID\tDISTANCE\tDOCUMENT\tMETADATA")
		for i, h := range hits {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", i+1, safeText(ellipsize(h.GetId(), 40)), strconv.FormatFloat(float64(h.GetDistance()), 'g', 6, 32),
				documentText(h.Document), metadataText(h.GetMetadata(), 60))
		}
		return tw.Flush()
	})
}
