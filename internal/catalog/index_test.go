package catalog_test

import (
	"context"
	"errors"
	"testing"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/vindex"
)

func TestCreateCollectionSpecKeepsTheIndexSettings(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		tests := []struct {
			name  string
			in    catalog.IndexSettings
			want  catalog.IndexSettings
			field string // of the *IndexSettingsError; "" when accepted
		}{
			{"zero settings take the defaults", catalog.IndexSettings{},
				catalog.IndexSettings{Distance: vindex.DistanceCosine, M: 16, EfConstruction: 200, EfSearch: 100}, ""},
			{"every setting is kept", catalog.IndexSettings{Distance: vindex.DistanceL2, M: 32, EfConstruction: 400, EfSearch: 50, Disabled: true},
				catalog.IndexSettings{Distance: vindex.DistanceL2, M: 32, EfConstruction: 400, EfSearch: 50, Disabled: true}, ""},
			{"inner product", catalog.IndexSettings{Distance: vindex.DistanceIP},
				catalog.IndexSettings{Distance: vindex.DistanceIP, M: 16, EfConstruction: 200, EfSearch: 100}, ""},
			{"a large m raises the default ef_construction to it", catalog.IndexSettings{M: 100},
				catalog.IndexSettings{Distance: vindex.DistanceCosine, M: 100, EfConstruction: 200, EfSearch: 100}, ""},
			{"m 1 is rejected", catalog.IndexSettings{M: 1}, catalog.IndexSettings{}, "m"},
			{"m 101 is rejected", catalog.IndexSettings{M: 101}, catalog.IndexSettings{}, "m"},
			{"ef_construction below m is rejected", catalog.IndexSettings{M: 32, EfConstruction: 16}, catalog.IndexSettings{}, "ef_construction"},
			{"a negative ef_search is rejected", catalog.IndexSettings{EfSearch: -1}, catalog.IndexSettings{}, "ef_search"},
			{"an ef_search over 10000 is rejected", catalog.IndexSettings{EfSearch: 10_001}, catalog.IndexSettings{}, "ef_search"},
			{"an unknown distance is rejected", catalog.IndexSettings{Distance: 9}, catalog.IndexSettings{}, "distance"},
		}
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				col, err := c.CreateCollectionSpec(ctx, catalog.CollectionSpec{Name: "spec-" + string(rune('a'+i)), Dimension: 4, Index: tt.in})
				if tt.field != "" {
					var se *catalog.IndexSettingsError
					if !errors.As(err, &se) || se.Field != tt.field || !errors.Is(err, catalog.ErrInvalidArgument) {
						t.Fatalf("CreateCollectionSpec(%+v) = %v, want an IndexSettingsError on %s", tt.in, err, tt.field)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				equal(t, "created settings", col.Index, tt.want)
				equal(t, "stored settings", mustGet(t, c, col.ID).Index, tt.want)
			})
		}
	})
}

// A collection inserted as by a process older than the index columns
// reads as cosine with the default parameters: the migration's defaults.
func TestCollectionsFromBeforeTheIndexColumnsAreCosine(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		db := rawDB(t, e)
		const id = "0b6a3c0e-8f1e-4a55-9f0e-5c1d2f3a4b5c"
		if _, err := db.ExecContext(context.Background(), `INSERT INTO collections (id, name, dimension, created_at, updated_at)
			VALUES ('`+id+`', 'old', 3, 1000, 1000)`); err != nil {
			t.Fatal(err)
		}
		want := catalog.IndexSettings{Distance: vindex.DistanceCosine, M: 16, EfConstruction: 200, EfSearch: 100}
		equal(t, "settings", mustGet(t, c, id).Index, want)
	})
}
