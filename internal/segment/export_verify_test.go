package segment

import "github.com/compactorhq/compactor/internal/materialize"

// SetDropRecord makes s's writers pass each block's records through fn
// before encoding them: a writer that loses (or alters) records, for the
// verification tests. It exists in test builds only.
func SetDropRecord(s *Store, fn func([]materialize.Record) []materialize.Record) { s.dropRecord = fn }
