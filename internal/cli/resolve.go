package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
)

// A collection is given to the CLI by its id or by its name, wherever it
// takes one (COLLECTION arguments, --collection). An id (a UUID) is passed
// to the server as it is; anything else is resolved against the list of
// collections (ListCollections), in this order:
//
//   - the collection with exactly this name (names are unique);
//   - the collection whose id starts with it (at least minIDPrefix
//     characters, as the status page shows ids by their first 8).
//
// Several collections matching (a name that is also another's id prefix, an
// id prefix shared by several) is an error listing them; no match is an
// error listing the collections with a similar name, or the first ones.

// minIDPrefix is the shortest id prefix that names a collection.
const minIDPrefix = 4

// maxCandidates is the most collections an unknown or ambiguous name lists.
const maxCandidates = 10

// resolveCollections returns the ids of refs (ids or names), listing the
// collections at most once.
func (s *session) resolveCollections(ctx context.Context, refs []string) ([]string, error) {
	ids := make([]string, len(refs))
	var all []*compactorv1.Collection
	listed := false
	for i, ref := range refs {
		if isID(ref) {
			ids[i] = ref
			continue
		}
		if !listed {
			var err error
			if all, err = s.listCollections(ctx); err != nil {
				return nil, fmt.Errorf("resolve collection name %q: %w", ref, err)
			}
			listed = true
		}
		c, err := matchCollection(all, ref)
		if err != nil {
			return nil, err
		}
		ids[i] = c.GetId()
	}
	return ids, nil
}

// resolveCollection returns the id of ref (an id or a name).
func (s *session) resolveCollection(ctx context.Context, ref string) (string, error) {
	ids, err := s.resolveCollections(ctx, []string{ref})
	if err != nil {
		return "", err
	}
	return ids[0], nil
}

// resolveOptionalCollection is resolveCollection, with "" (no collection
// filter) kept as it is.
func (s *session) resolveOptionalCollection(ctx context.Context, ref string) (string, error) {
	if ref == "" {
		return "", nil
	}
	return s.resolveCollection(ctx, ref)
}

// firstArg is args[0], or "" when there is none.
func firstArg(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}

// isID reports whether ref is a collection id: a UUID in its canonical form.
func isID(ref string) bool {
	u, err := uuid.Parse(ref)
	return err == nil && u.String() == strings.ToLower(ref)
}

// listCollections returns every collection, following pages.
func (s *session) listCollections(ctx context.Context) ([]*compactorv1.Collection, error) {
	return collect(ctx, 0, func(ctx context.Context, size int32, token string) ([]*compactorv1.Collection, string, error) {
		res, err := unary(ctx, s, s.c.collection.ListCollections, &compactorv1.ListCollectionsRequest{PageSize: size, PageToken: token})
		return res.GetCollections(), res.GetNextPageToken(), err
	})
}

// matchCollection finds the one collection of all that ref names (by name,
// or by id prefix).
func matchCollection(all []*compactorv1.Collection, ref string) (*compactorv1.Collection, error) {
	var matches []*compactorv1.Collection
	for _, c := range all {
		if c.GetName() == ref {
			matches = append(matches, c)
		}
	}
	if len(ref) >= minIDPrefix {
		prefix := strings.ToLower(ref)
		for _, c := range all {
			if strings.HasPrefix(c.GetId(), prefix) && !slices.Contains(matches, c) {
				matches = append(matches, c)
			}
		}
	}
	switch len(matches) {
	case 1:
		return matches[0], nil
	case 0:
		var similar []*compactorv1.Collection
		for _, c := range all {
			if strings.Contains(strings.ToLower(c.GetName()), strings.ToLower(ref)) ||
				strings.Contains(strings.ToLower(ref), strings.ToLower(c.GetName())) {
				similar = append(similar, c)
			}
		}
		switch {
		case len(all) == 0:
			return nil, fmt.Errorf("collection \"%s\" not found: the server has no collections (create one with: compactor collections create NAME)", safeText(ref))
		case len(similar) > 0:
			return nil, fmt.Errorf("collection \"%s\" not found (no collection has this name or id); similar names: %s", safeText(ref), candidates(similar))
		}
		return nil, fmt.Errorf("collection \"%s\" not found (no collection has this name or id); collections: %s", safeText(ref), candidates(all))
	}
	return nil, fmt.Errorf("collection \"%s\" is ambiguous: it names %d collections: %s; give the full id", safeText(ref), len(matches), candidates(matches))
}

// candidates lists at most maxCandidates collections as "name (id)".
func candidates(cs []*compactorv1.Collection) string {
	var parts []string
	for _, c := range cs[:min(len(cs), maxCandidates)] {
		parts = append(parts, fmt.Sprintf("%s (%s)", safeText(ellipsize(c.GetName(), 60)), c.GetId()))
	}
	s := strings.Join(parts, ", ")
	if len(cs) > maxCandidates {
		s += fmt.Sprintf(" and %d more (see: compactor collections)", len(cs)-maxCandidates)
	}
	return s
}
