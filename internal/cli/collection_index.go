package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
)

// createIndexOptions are the distance and index flags of collections
// create.
type createIndexOptions struct {
	distance                    string
	m, efConstruction, efSearch int32
	noIndex                     bool
}

func (o *createIndexOptions) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.distance, "distance", "cosine", "distance of queries: l2, cosine or ip (fixed at creation)")
	f.Int32Var(&o.m, "m", 0, "HNSW neighbours per node, 2..100 (0: 16)")
	f.Int32Var(&o.efConstruction, "ef-construction", 0, "HNSW candidate list size while building, m..10000 (0: 200)")
	f.Int32Var(&o.efSearch, "ef-search", 0, "default candidate list size of a query, 1..10000 (0: 100)")
	f.BoolVar(&o.noIndex, "no-index", false, "build no vector index: every query scans")
	_ = cmd.RegisterFlagCompletionFunc("distance", cobra.FixedCompletions([]string{"l2", "cosine", "ip"}, cobra.ShellCompDirectiveNoFileComp))
	for _, name := range []string{"m", "ef-construction", "ef-search"} {
		_ = cmd.RegisterFlagCompletionFunc(name, cobra.NoFileCompletions)
	}
}

// apply sets the request's distance and index settings.
func (o *createIndexOptions) apply(req *compactorv1.CreateCollectionRequest) error {
	switch strings.ToLower(strings.TrimSpace(o.distance)) {
	case "l2":
		req.Distance = compactorv1.Distance_DISTANCE_L2
	case "cosine", "":
		req.Distance = compactorv1.Distance_DISTANCE_COSINE
	case "ip":
		req.Distance = compactorv1.Distance_DISTANCE_IP
	default:
		return fmt.Errorf("--distance %q is not l2, cosine or ip", o.distance)
	}
	for _, f := range []struct {
		name string
		v    int32
	}{{"--m", o.m}, {"--ef-construction", o.efConstruction}, {"--ef-search", o.efSearch}} {
		if f.v < 0 {
			return fmt.Errorf("%s must not be negative, got %d", f.name, f.v)
		}
	}
	req.Index = &compactorv1.IndexSettings{M: o.m, EfConstruction: o.efConstruction, EfSearch: o.efSearch, Disabled: o.noIndex}
	return nil
}

// distanceName is the CLI's name of d: its enum name without the prefix,
// lower case ("cosine"); "-" for none or one this client does not know.
func distanceName(d compactorv1.Distance) string {
	if _, known := compactorv1.Distance_name[int32(d)]; !known || d == compactorv1.Distance_DISTANCE_UNSPECIFIED {
		return "-"
	}
	return strings.ToLower(strings.TrimPrefix(d.String(), "DISTANCE_"))
}

// indexText describes the index settings in one line.
func indexText(ix *compactorv1.IndexSettings) string {
	if ix == nil {
		return "-"
	}
	s := fmt.Sprintf("HNSW, m %d, ef_construction %d, ef_search %d", ix.GetM(), ix.GetEfConstruction(), ix.GetEfSearch())
	if ix.GetDisabled() {
		s = "off (queries scan); " + s
	}
	return s
}
