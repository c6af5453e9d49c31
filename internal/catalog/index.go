package catalog

import (
	"fmt"

	"github.com/compactorhq/compactor/internal/vindex"
)

// Defaults and bounds of IndexSettings: the defaults are the index's own;
// the bounds are within the index's (vindex.MaxM, vindex.MaxEf).
const (
	DefaultIndexM              = vindex.DefaultM
	DefaultIndexEfConstruction = vindex.DefaultEfConstruction
	DefaultIndexEfSearch       = vindex.DefaultEfSearch
	MinIndexM                  = 2
	MaxIndexM                  = 100
	MaxIndexEf                 = 10_000 // ef_construction and ef_search
)

// IndexSettings are a collection's query distance and vector index
// parameters, fixed at creation (columns distance, index_*).
type IndexSettings struct {
	// Distance ranks query results; DistanceUnspecified on creation means
	// vindex.DefaultDistance.
	Distance vindex.Distance
	// M is the HNSW graph's neighbours per node and layer; 0 on creation:
	// DefaultIndexM.
	M int
	// EfConstruction is the candidate list size while building; 0 on
	// creation: DefaultIndexEfConstruction.
	EfConstruction int
	// EfSearch is a query's default candidate list size; 0 on creation:
	// DefaultIndexEfSearch.
	EfSearch int
	// Disabled: the collection has no index; every query scans.
	Disabled bool
}

// WithDefaults returns s with every zero field set to its default.
func (s IndexSettings) WithDefaults() IndexSettings {
	if s.Distance == vindex.DistanceUnspecified {
		s.Distance = vindex.DefaultDistance
	}
	if s.M == 0 {
		s.M = DefaultIndexM
	}
	if s.EfConstruction == 0 {
		s.EfConstruction = max(DefaultIndexEfConstruction, s.M)
	}
	if s.EfSearch == 0 {
		s.EfSearch = DefaultIndexEfSearch
	}
	return s
}

// IndexSettingsError is an IndexSettings field out of bounds; it matches
// ErrInvalidArgument. Field is the setting's name as the API spells it
// (m, ef_construction, ef_search, distance).
type IndexSettingsError struct {
	Field   string
	Problem string
}

func (e *IndexSettingsError) Error() string {
	return fmt.Sprintf("index setting %s: %s", e.Field, e.Problem)
}

// Is makes errors.Is(err, ErrInvalidArgument) hold.
func (e *IndexSettingsError) Is(target error) bool { return target == ErrInvalidArgument }

// Validate checks s after WithDefaults: a known distance, M in
// MinIndexM..MaxIndexM, EfConstruction in M..MaxIndexEf, EfSearch in
// 1..MaxIndexEf. Errors: *IndexSettingsError.
func (s IndexSettings) Validate() error {
	switch {
	case s.Distance != vindex.DistanceL2 && s.Distance != vindex.DistanceCosine && s.Distance != vindex.DistanceIP:
		return &IndexSettingsError{"distance", fmt.Sprintf("%s is not l2, cosine or ip", s.Distance)}
	case s.M < MinIndexM || s.M > MaxIndexM:
		return &IndexSettingsError{"m", fmt.Sprintf("%d is outside %d..%d", s.M, MinIndexM, MaxIndexM)}
	case s.EfConstruction < s.M || s.EfConstruction > MaxIndexEf:
		return &IndexSettingsError{"ef_construction", fmt.Sprintf("%d is outside m..%d (%d..%d)", s.EfConstruction, MaxIndexEf, s.M, MaxIndexEf)}
	case s.EfSearch < 1 || s.EfSearch > MaxIndexEf:
		return &IndexSettingsError{"ef_search", fmt.Sprintf("%d is outside 1..%d", s.EfSearch, MaxIndexEf)}
	}
	return nil
}

// CollectionSpec is what CreateCollectionSpec creates.
type CollectionSpec struct {
	Name string
	// Dimension 0 leaves it to be fixed by the first write.
	Dimension int
	// Index: zero fields take their defaults (IndexSettings.WithDefaults).
	Index IndexSettings
}

// scanIndex fills s from the columns distance, index_m,
// index_ef_construction, index_ef_search, index_disabled.
func scanIndex(s *IndexSettings, distance string, m, efc, efs, disabled int64) error {
	d, err := vindex.ParseDistance(distance)
	if err != nil {
		return fmt.Errorf("collection row: %w", err)
	}
	*s = IndexSettings{Distance: d, M: int(m), EfConstruction: int(efc), EfSearch: int(efs), Disabled: disabled != 0}
	return nil
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
